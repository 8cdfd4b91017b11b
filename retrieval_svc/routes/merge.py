"""Drop-in for the customer's merge code node."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.merge import (
    ShapeError,
    extract_web_items,
    merge,
    numbered_output,
    rag_from_dify,
    rag_items,
)
from retrieval_svc.schemas import MergeRequest, ToolOutput

router = APIRouter(prefix="/v1", tags=["merge"])


@router.post("/merge", response_model=ToolOutput)
async def merge_chunks(
    body: MergeRequest,
    key: ApiKeyDep,  # noqa: ARG001 (authenticated; the direct-route shape names it)
    state: StateDep,
) -> dict[str, Any]:
    """Merge Dify's RAG results and a web node's output into the numbered G-Cite context."""
    settings = state.settings
    limit = settings.web_max_results if body.max_web_results is None else body.max_web_results
    try:
        rag, web = rag_items(body.rag_chunks), extract_web_items(body.web_chunks)
    except ShapeError as exc:
        raise InvalidRequest(str(exc), path=exc.path) from None
    return numbered_output(merge(rag_from_dify(rag), web, limit))
