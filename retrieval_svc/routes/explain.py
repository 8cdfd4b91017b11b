"""Operator endpoint: why a principal can or cannot see a chunk."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from retrieval_svc.access import explain_chunk, kb_access
from retrieval_svc.auth.identity import Claims, resolve_principal
from retrieval_svc.auth.keys import IdentityMode
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest
from retrieval_svc.schemas import ExplainRequest, ExplainResponse

router = APIRouter(prefix="/v1", tags=["operations"])


@router.post("/explain", response_model=ExplainResponse)
async def explain(body: ExplainRequest, key: ApiKeyDep, state: StateDep) -> dict[str, Any]:
    """For a principal and a chunk or document id: visible or not, and why (admin keys)."""
    if not key.admin:
        raise AuthorizationFailed(f"API key {key.name!r} is not an admin key")
    if (body.chunk_id is None) == (body.document_id is None):
        raise InvalidRequest("send exactly one of chunk_id and document_id", path="chunk_id")
    # An admin key describes any principal of its tenant, as a trusted backend would.
    as_trusted = key.model_copy(update={"mode": IdentityMode.TRUSTED})
    claims = body.principal.claims() if body.principal else Claims()
    principal = resolve_principal(as_trusted, claims, state.acl)
    sources = await state.engine.get_chunks(
        tenant=principal.tenant, chunk_id=body.chunk_id, document_id=body.document_id
    )
    # Explain sees what this key could retrieve, no more: a chunk of a knowledge base outside
    # the key's scope is reported as not found, exactly like one that does not exist.
    chunks = [
        explain_chunk(source, principal, kb_access(state.acl, key, principal, kb))
        for source in sources
        if key.may_read(kb := str(source.get("knowledge_id", "")))
    ]
    return {
        "principal": {
            "tenant": principal.tenant,
            "user_id": principal.user_id,
            "effective_roles": sorted(principal.roles),
        },
        "found": bool(chunks),
        "chunks": chunks,
    }
