"""Resolving [C:N] citations in a generated answer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from retrieval_svc.citations import resolve
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.schemas import CitationRequest, CitationResponse

router = APIRouter(prefix="/v1/citations", tags=["citations"])


@router.post("/resolve", response_model=CitationResponse)
async def resolve_citations(
    body: CitationRequest,
    key: ApiKeyDep,  # noqa: ARG001 (authenticated; the direct-route shape names it)
    state: StateDep,  # noqa: ARG001
) -> dict[str, Any]:
    """Renumber markers by first appearance; list cited, uncited and unknown chunk ids."""
    return resolve(body.answer, body.chunk_metadata)
