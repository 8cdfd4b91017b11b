"""A plain-Python reading of design.md §4 (visibility) and §5 (filters), independent of the service.

Deliberately naive: it works on the documents as the test generated them, not as
Elasticsearch stored them, so a disagreement points at the service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def visible(doc_roles: list[str] | None, principal_roles: set[str]) -> bool:
    """§4: absent, null or [] is public; otherwise the sets must intersect."""
    return not doc_roles or bool(set(doc_roles) & principal_roles)


def closure(roles: set[str], inherits: Mapping[str, set[str]]) -> set[str]:
    """Roles plus everything they inherit, transitively."""
    out, todo = set(), list(roles)
    while todo:
        role = todo.pop()
        if role not in out:
            out.add(role)
            todo.extend(inherits.get(role, ()))
    return out


def _values(doc: Mapping[str, Any], field: str) -> list[Any]:
    value = doc.get(field)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def matches(doc: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    """§5 over a flat document {field: value | list | None}."""
    if "and" in flt:
        return all(matches(doc, f) for f in flt["and"])
    if "or" in flt:
        return any(matches(doc, f) for f in flt["or"])
    if "not" in flt:
        return not matches(doc, flt["not"])
    vals, op, v = _values(doc, flt["field"]), flt["op"], flt.get("value")
    if op == "eq":
        return v in vals
    if op == "ne":
        return v not in vals
    if op in ("in", "any"):
        return any(x in vals for x in v)
    if op in ("nin", "none"):
        return not any(x in vals for x in v)
    if op == "all":
        return all(x in vals for x in v)
    if op == "contains":
        return any(v in x for x in vals)
    if op == "not_contains":
        return not any(v in x for x in vals)
    if op == "prefix":
        return any(x.startswith(v) for x in vals)
    if op == "suffix":
        return any(x.endswith(v) for x in vals)
    if op == "exists":
        return bool(vals)
    if op == "missing":
        return not vals
    if op == "gt":
        return any(x > v for x in vals)
    if op == "gte":
        return any(x >= v for x in vals)
    if op == "lt":
        return any(x < v for x in vals)
    if op == "lte":
        return any(x <= v for x in vals)
    if op == "between":
        return any(v[0] <= x <= v[1] for x in vals)
    raise AssertionError(f"reference has no operator {op}")


def fields(flt: Mapping[str, Any]) -> set[str]:
    """The field names a filter tree's conditions use."""
    if "and" in flt or "or" in flt:
        return set().union(*(fields(c) for c in flt.get("and", flt.get("or", []))))
    if "not" in flt:
        return fields(flt["not"])
    return {flt["field"]}


def present(value: Any) -> bool:
    """Whether a stored metadata value makes the field exist (Elasticsearch skips ``[]``)."""
    return value is not None and value != []
