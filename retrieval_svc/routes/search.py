"""The native search API."""

from __future__ import annotations

from fastapi import APIRouter

from retrieval_svc.auth.identity import Claims
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.filters import parse_filter
from retrieval_svc.merge import numbered_output
from retrieval_svc.retrieval import RetrievalQuery, WebRequest, answer, cut_query
from retrieval_svc.schemas import (
    SearchMeta,
    SearchRequest,
    SearchResponse,
    WebMeta,
)

router = APIRouter(prefix="/v1", tags=["search"])


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, key: ApiKeyDep, state: StateDep) -> SearchResponse:
    """Search knowledge bases with a nested filter, as a principal; G-Cite numbered output."""
    tree = parse_filter(body.filter) if body.filter is not None else None
    web = None
    if body.web is not None and body.web.enabled:
        web = WebRequest(
            max_results=body.web.max_results or state.settings.web_max_results,
            freshness=body.web.freshness,
        )
    done = await answer(
        state,
        key,
        RetrievalQuery(
            query=cut_query(body.query, state.settings.max_query_chars),
            knowledge_ids=body.knowledge_ids,
            top_k=body.top_k,
            score_threshold=body.score_threshold,
            filter=tree,
            claims=body.principal.claims() if body.principal else Claims(),
            mode=body.mode,
        ),
        web,
    )
    found = done.retrieval
    # Built from the service's own typed parts: not validated again (a copy of every chunk).
    return SearchResponse.model_construct(
        **numbered_output(done.chunks),
        meta=SearchMeta(
            took_ms=done.took_ms,
            es_took_ms=found.result.took_ms,
            mode=found.result.mode,
            rerank=found.rerank,
            web=WebMeta(
                status=found.web.status,
                provider=found.web.provider,
                took_ms=found.web.took_ms,
                detail=found.web.detail,
            ),
        ),
    )
