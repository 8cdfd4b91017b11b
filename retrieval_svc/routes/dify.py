"""Dify's External Knowledge API."""

from __future__ import annotations

from fastapi import APIRouter

from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.dify.records import to_record
from retrieval_svc.dify.schemas import RetrievalRequest, RetrievalResponse
from retrieval_svc.filters.dify import translate
from retrieval_svc.retrieval import (
    RetrievalQuery,
    answer,
    configured_web,
    cut_query,
    knowledge_base_mode,
)

router = APIRouter(tags=["dify"])


@router.post("/retrieval", response_model=RetrievalResponse)
async def retrieval(body: RetrievalRequest, key: ApiKeyDep, state: StateDep) -> RetrievalResponse:
    """Retrieve chunks of one knowledge base for Dify's knowledge-retrieval node."""
    tree, claims = translate(body.metadata_condition, state.identity_names)
    settings = state.settings
    done = await answer(
        state,
        key,
        RetrievalQuery(
            query=cut_query(body.query, settings.max_query_chars),  # Dify sets no bound
            knowledge_ids=[body.knowledge_id],
            top_k=body.retrieval_setting.top_k,
            score_threshold=body.retrieval_setting.score_threshold,
            filter=tree,
            filter_path="metadata_condition",
            claims=claims,
            mode=knowledge_base_mode(settings.retrieval_modes, body.knowledge_id),
        ),
        configured_web(state, body.knowledge_id),
    )
    return RetrievalResponse(records=[to_record(c) for c in done.chunks])
