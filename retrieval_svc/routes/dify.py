"""Dify's External Knowledge API."""

from __future__ import annotations

from fastapi import APIRouter

from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.dify.records import to_record
from retrieval_svc.dify.schemas import RetrievalRequest, RetrievalResponse
from retrieval_svc.filters.dify import translate
from retrieval_svc.merge import number_chunks
from retrieval_svc.retrieval import RetrievalQuery, retrieve

router = APIRouter(tags=["dify"])


@router.post("/retrieval", response_model=RetrievalResponse)
async def retrieval(body: RetrievalRequest, key: ApiKeyDep, state: StateDep) -> RetrievalResponse:
    """Retrieve chunks of one knowledge base for Dify's knowledge-retrieval node."""
    tree, claims = translate(body.metadata_condition, state.identity_names)
    done = await retrieve(
        state,
        key,
        RetrievalQuery(
            query=body.query,
            knowledge_ids=[body.knowledge_id],
            top_k=body.retrieval_setting.top_k,
            score_threshold=body.retrieval_setting.score_threshold,
            filter=tree,
            filter_path="metadata_condition",
            claims=claims,
        ),
    )
    return RetrievalResponse(records=[to_record(c) for c in number_chunks(done.result.chunks)])
