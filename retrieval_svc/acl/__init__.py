"""Access control: who holds which roles, and which chunks a principal may see."""

from retrieval_svc.acl.rule import ACL_FIELD, acl_query, is_visible, stored_roles
from retrieval_svc.acl.values import ListValueError, RoleValueError, parse_list, parse_roles

__all__ = [
    "ACL_FIELD",
    "ListValueError",
    "RoleValueError",
    "acl_query",
    "is_visible",
    "parse_list",
    "parse_roles",
    "stored_roles",
]
