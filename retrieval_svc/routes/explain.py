"""Operator endpoint: why a principal can or cannot see a chunk."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from retrieval_svc.auth.identity import Claims
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest
from retrieval_svc.retrieval import explain_visibility
from retrieval_svc.schemas import ExplainRequest, ExplainResponse

router = APIRouter(prefix="/v1", tags=["operations"])


@router.post("/explain", response_model=ExplainResponse)
async def explain(body: ExplainRequest, key: ApiKeyDep, state: StateDep) -> dict[str, Any]:
    """For a principal and a chunk or document id: visible or not, and why (admin keys)."""
    if not key.admin:
        raise AuthorizationFailed(f"API key {key.name!r} is not an admin key", reason="key_kind")
    if (body.chunk_id is None) == (body.document_id is None):
        raise InvalidRequest("send exactly one of chunk_id and document_id", path="chunk_id")
    claims = body.principal.claims() if body.principal else Claims()
    return await explain_visibility(
        state, key, claims, chunk_id=body.chunk_id, document_id=body.document_id
    )
