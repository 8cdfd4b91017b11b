"""Access control: who holds which roles, and which chunks a principal may see."""

from retrieval_svc.acl.rule import (
    ACL_FIELD,
    ALSO_FIELD,
    DEFAULT_TENANT,
    DENIED_FIELD,
    TENANT_FIELD,
    acl_query,
    chunk_visible,
    in_tenant,
    is_visible,
    stored_roles,
    tenant_query,
)
from retrieval_svc.acl.values import ListValueError, RoleValueError, parse_list, parse_roles

__all__ = [
    "ACL_FIELD",
    "ALSO_FIELD",
    "DEFAULT_TENANT",
    "DENIED_FIELD",
    "TENANT_FIELD",
    "ListValueError",
    "RoleValueError",
    "acl_query",
    "chunk_visible",
    "in_tenant",
    "is_visible",
    "parse_list",
    "parse_roles",
    "stored_roles",
    "tenant_query",
]
