"""The visibility rule of design.md §4, once as an Elasticsearch clause and once in Python.

A chunk is visible to a principal iff its ``access_roles`` is absent, null or empty, or shares
at least one role with the principal's effective roles. The Elasticsearch clause and the
Python predicate below must agree exactly: the predicate re-checks every hit before it leaves
the service.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from retrieval_svc.tenancy import DEFAULT_TENANT

__all__ = [
    "ACL_FIELD",
    "DEFAULT_TENANT",
    "TENANT_FIELD",
    "acl_query",
    "in_tenant",
    "is_visible",
    "stored_roles",
    "tenant_query",
]

ACL_FIELD = "access_roles"


def acl_query(roles: Collection[str]) -> dict[str, Any]:
    """The filter clause that admits exactly the chunks visible to holders of ``roles``."""
    public: dict[str, Any] = {"bool": {"must_not": [{"exists": {"field": ACL_FIELD}}]}}
    if not roles:
        return public
    return {
        "bool": {
            "should": [public, {"terms": {ACL_FIELD: sorted(roles)}}],
            "minimum_should_match": 1,
        }
    }


def stored_roles(source: Mapping[str, Any]) -> frozenset[str]:
    """The roles a stored chunk requires, as Elasticsearch sees them (empty = public).

    Elasticsearch indexes a keyword field holding a string as one term and a list as its
    elements, skipping nulls; this mirrors that so the post-check agrees with the query.
    """
    value = source.get(ACL_FIELD)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset((value,))
    if isinstance(value, list):
        return frozenset(str(v) for v in value if v is not None)
    return frozenset((str(value),))


def is_visible(required: Collection[str], roles: Collection[str]) -> bool:
    """Whether a chunk requiring ``required`` (empty = public) is visible to ``roles``."""
    if not required:
        return True
    return not frozenset(required).isdisjoint(roles)


# Tenants (design.md §4): every chunk belongs to one; a principal sees only its own tenant's.
TENANT_FIELD = "tenant"


def tenant_query(tenant: str) -> dict[str, Any]:
    """The filter clause that admits exactly the chunks of ``tenant``."""
    return {"term": {TENANT_FIELD: tenant}}


def in_tenant(source: Mapping[str, Any], tenant: str) -> bool:
    """Whether a stored chunk belongs to ``tenant`` (a chunk without one belongs to none)."""
    return source.get(TENANT_FIELD) == tenant
