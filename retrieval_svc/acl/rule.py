"""The visibility rule of design.md §4, once as an Elasticsearch clause and once in Python.

A chunk is visible to a principal iff its ``access_roles`` is absent, null or empty, or shares
at least one role with the principal's effective roles — and, where a source keeps an access
list the single list cannot hold (design.md §16: a Windows share's DACL), also:

* ``access_also``: a second list that must share a role too (absent or empty: no condition) —
  what a rules file, sidecar or tag says of a document whose DACL set ``access_roles``: they
  narrow it, never widen it;
* ``access_denied``: roles whose holders never see the chunk (a DACL's deny entries).

The Elasticsearch clause and the Python predicate below must agree exactly: the predicate
re-checks every hit before it leaves the service.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from retrieval_svc.tenancy import DEFAULT_TENANT

__all__ = [
    "ACL_FIELD",
    "ALSO_FIELD",
    "DEFAULT_TENANT",
    "DENIED_FIELD",
    "TENANT_FIELD",
    "acl_query",
    "chunk_visible",
    "in_tenant",
    "is_visible",
    "stored_roles",
    "tenant_query",
]

ACL_FIELD = "access_roles"
ALSO_FIELD = "access_also"
DENIED_FIELD = "access_denied"


def _any_of(field: str, roles: Collection[str]) -> dict[str, Any]:
    """``field`` absent, or sharing a role with ``roles``."""
    public: dict[str, Any] = {"bool": {"must_not": [{"exists": {"field": field}}]}}
    if not roles:
        return public
    return {
        "bool": {
            "should": [public, {"terms": {field: sorted(roles)}}],
            "minimum_should_match": 1,
        }
    }


def acl_query(roles: Collection[str]) -> dict[str, Any]:
    """The filter clause that admits exactly the chunks visible to holders of ``roles``."""
    clause: dict[str, Any] = {"filter": [_any_of(ACL_FIELD, roles), _any_of(ALSO_FIELD, roles)]}
    if roles:
        clause["must_not"] = [{"terms": {DENIED_FIELD: sorted(roles)}}]
    return {"bool": clause}


def stored_roles(source: Mapping[str, Any], field: str = ACL_FIELD) -> frozenset[str]:
    """The roles a stored chunk holds in ``field`` as Elasticsearch sees them (empty: none).

    Elasticsearch indexes a keyword field holding a string as one term and a list as its
    elements, skipping nulls; this mirrors that so the post-check agrees with the query.
    """
    value = source.get(field)
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


def chunk_visible(source: Mapping[str, Any], roles: Collection[str]) -> bool:
    """Whether a stored chunk is visible to holders of ``roles``: the whole rule above, as
    ``acl_query`` applies it."""
    return (
        is_visible(stored_roles(source), roles)
        and is_visible(stored_roles(source, ALSO_FIELD), roles)
        and stored_roles(source, DENIED_FIELD).isdisjoint(roles)
    )


# Tenants (design.md §4): every chunk belongs to one; a principal sees only its own tenant's.
TENANT_FIELD = "tenant"


def tenant_query(tenant: str) -> dict[str, Any]:
    """The filter clause that admits exactly the chunks of ``tenant``."""
    return {"term": {TENANT_FIELD: tenant}}


def in_tenant(source: Mapping[str, Any], tenant: str) -> bool:
    """Whether a stored chunk belongs to ``tenant`` (a chunk without one belongs to none)."""
    return source.get(TENANT_FIELD) == tenant
