"""Where a document's roles come from besides the document (issue #35 §1–§2, design.md §16):
folder rules (``--acl-rules``) and object tags (``--roles-tag``), and which of them won."""

from indexer.permissions.grants import Outside, versioned
from indexer.permissions.rules import (
    AclRules,
    Rule,
    RulesError,
    changed_below,
    load_rules,
    parse_rules,
)
from indexer.permissions.tags import DEFAULT_ROLES_TAG, TagError, roles_from_tag

__all__ = [
    "DEFAULT_ROLES_TAG",
    "AclRules",
    "Outside",
    "Rule",
    "RulesError",
    "TagError",
    "changed_below",
    "load_rules",
    "parse_rules",
    "roles_from_tag",
    "versioned",
]
