"""Why a principal can or cannot see a chunk: what an operator needs for "I can't see X"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_svc.acl.casbin_acl import KbDecision
from retrieval_svc.acl.rule import is_visible, stored_roles
from retrieval_svc.auth.principal import Principal


def explain_chunk(
    source: Mapping[str, Any],
    principal: Principal,
    *,
    key_allows: bool,
    decision: KbDecision,
) -> dict[str, Any]:
    """Visibility of one stored chunk to ``principal``, with the rule that decided it."""
    required = stored_roles(source)
    matched = sorted(required & principal.roles)
    acl_ok = is_visible(required, principal.roles)
    if not required:
        rule = "public: access_roles is absent, null or empty"
    elif matched:
        rule = "intersection: the principal holds " + ", ".join(matched)
    else:
        rule = "restricted: the principal holds none of the chunk's roles"
    kb = source.get("knowledge_id")
    if not key_allows:
        kb_reason = f"the API key is not scoped to knowledge base {kb!r}"
    elif decision.allowed:
        kb_reason = f"policy grants read to {decision.granted_by!r}"
    else:
        kb_reason = f"no policy lets the principal read {kb!r} in tenant {principal.tenant!r}"
    return {
        "chunk_id": source.get("chunk_id"),
        "document_id": source.get("document_id"),
        "knowledge_id": kb,
        "visible": acl_ok and key_allows and decision.allowed,
        "acl": {
            "access_roles": sorted(required),
            "matched_roles": matched,
            "visible": acl_ok,
            "rule": rule,
        },
        "knowledge_base": {"readable": key_allows and decision.allowed, "reason": kb_reason},
    }
