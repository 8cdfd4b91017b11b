"""Who may read what: the one decision about a knowledge base, and the explanation of a chunk.

``kb_access`` is the only place that decides whether a key, acting for a principal, may read
a knowledge base: retrieval refuses with its reason, and explain reports it, so the two cannot
drift apart (datasette's ``allowed()`` serves its debug views the same way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.rule import (
    ALSO_FIELD,
    DENIED_FIELD,
    chunk_visible,
    is_visible,
    stored_roles,
)
from retrieval_svc.acl.sids import PERSON_ROLES
from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.auth.principal import Principal
from retrieval_svc.errors import AuthorizationFailed


@dataclass(frozen=True, slots=True)
class KbAccess:
    """Whether a knowledge base may be read, and why (or why not)."""

    allowed: bool
    reason: str
    code: str = "granted"  # granted | no_policy | key_scope: the reason, for words in any language
    granted_by: str | None = None  # the policy subject whose grant allowed it


def kb_access(
    acl: AccessControl, key: ApiKeyConfig, principal: Principal, knowledge_id: str
) -> KbAccess:
    """Whether ``key``, acting for ``principal``, may read ``knowledge_id``: the key's scope
    first, then the Casbin policy for the principal in its tenant."""
    if not key.may_read(knowledge_id):
        return KbAccess(
            False, f"API key {key.name!r} may not read knowledge base {knowledge_id!r}", "key_scope"
        )
    decision = acl.kb_decision(
        tenant=principal.tenant,
        user_id=principal.user_id,
        roles=principal.roles,
        knowledge_id=knowledge_id,
    )
    if decision.allowed:
        return KbAccess(
            True, f"policy grants read to {decision.granted_by!r}", granted_by=decision.granted_by
        )
    return KbAccess(
        False,
        f"no policy lets this principal read knowledge base {knowledge_id!r} "
        f"in tenant {principal.tenant!r}",
        "no_policy",
    )


def authorize(
    acl: AccessControl, key: ApiKeyConfig, principal: Principal, knowledge_ids: Sequence[str]
) -> None:
    """Refuse (``AuthorizationFailed``, with the reason) unless every knowledge base may be read."""
    for knowledge_id in knowledge_ids:
        access = kb_access(acl, key, principal, knowledge_id)
        if not access.allowed:
            raise AuthorizationFailed(access.reason, reason=access.code)


def explain_chunk(
    source: Mapping[str, Any], principal: Principal, access: KbAccess
) -> dict[str, Any]:
    """Visibility of one stored chunk to ``principal``, with the rule that decided it."""
    required = stored_roles(source)
    also, denied = stored_roles(source, ALSO_FIELD), stored_roles(source, DENIED_FIELD)
    roles = principal.roles
    matched = sorted(required & roles)
    refused = sorted(denied & roles)
    acl_ok = chunk_visible(source, roles)
    metadata = source.get("metadata") or {}
    unknown = [str(s) for s in metadata.get("access_unknown_sids") or []]
    if refused and unknown and set(refused) <= PERSON_ROLES:
        code, rule = (
            "narrowed",
            (
                "narrowed: a deny of its DACL names " + ", ".join(unknown) + ", a SID no "
                "directory sync read: refused to every person (fail closed)"
            ),
        )
    elif refused:
        code, rule = "denied", "denied: the principal holds " + ", ".join(refused)
    elif not is_visible(required, roles):
        code, rule = "restricted", "restricted: the principal holds none of the chunk's roles"
    elif not is_visible(also, roles):
        code, rule = "narrowed", "narrowed: the principal holds none of the roles that narrow it"
    elif not required and not also:
        code, rule = "public", "public: access_roles is absent, null or empty"
    else:
        code, rule = "intersection", "intersection: the principal holds " + ", ".join(matched)
    return {
        "chunk_id": source.get("chunk_id"),
        "document_id": source.get("document_id"),
        "knowledge_id": source.get("knowledge_id"),
        "visible": acl_ok and access.allowed,
        "acl": {
            "access_roles": sorted(required),
            "access_also": sorted(also),
            "access_denied": sorted(denied),
            "matched_roles": matched,
            "denied_roles": refused,
            "visible": acl_ok,
            "rule": rule,
            "code": code,  # the rule, for words in the reader's language
            # What set the roles when indexed: front matter, sidecar, manifest, an object tag,
            # a folder rule or a file's DACL (design.md §16); None when nothing did.
            "set_by": metadata.get("access_roles_from"),
            # For a file's DACL: the ACEs behind the roles, in their order, and whether the
            # index holds exactly what Windows allows (else narrower: which allows it cut).
            "aces": list(metadata.get("access_aces") or []),
            "narrowed": list(metadata.get("access_narrowed") or []),
            # Denies naming a SID whose holders no directory sync read: every person refused.
            "unknown_sids": unknown,
        },
        "knowledge_base": {
            "readable": access.allowed,
            "reason": access.reason,
            "code": access.code,
            "granted_by": access.granted_by,
        },
    }
