"""Dify's External Knowledge API."""

from __future__ import annotations

from fnmatch import fnmatchcase

from fastapi import APIRouter

from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.dify.records import dify_chunks, to_record
from retrieval_svc.dify.schemas import RetrievalRequest, RetrievalResponse
from retrieval_svc.filters.dify import translate
from retrieval_svc.merge import web_chunks
from retrieval_svc.retrieval import RetrievalQuery, WebRequest, cut_query, retrieve
from retrieval_svc.search.engine import Mode

router = APIRouter(tags=["dify"])


def knowledge_base_mode(modes: dict[str, Mode], knowledge_id: str) -> Mode | None:
    """The mode configured for a knowledge base (``RSVC_RETRIEVAL_MODES``, glob patterns; the
    longest matching pattern wins); None: the service default. Dify's request has no mode."""
    matching = [p for p in modes if fnmatchcase(knowledge_id, p)]
    return modes[max(matching, key=len)] if matching else None


@router.post("/retrieval", response_model=RetrievalResponse)
async def retrieval(body: RetrievalRequest, key: ApiKeyDep, state: StateDep) -> RetrievalResponse:
    """Retrieve chunks of one knowledge base for Dify's knowledge-retrieval node."""
    tree, claims = translate(body.metadata_condition, state.identity_names)
    settings = state.settings
    web = None
    if state.web.enabled and any(
        fnmatchcase(body.knowledge_id, p) for p in settings.web_knowledge_ids
    ):
        web = WebRequest(max_results=settings.web_max_results)
    done = await retrieve(
        state,
        key,
        RetrievalQuery(
            query=cut_query(body.query, settings.max_query_chars),
            knowledge_ids=[body.knowledge_id],
            top_k=body.retrieval_setting.top_k,
            score_threshold=body.retrieval_setting.score_threshold,
            filter=tree,
            filter_path="metadata_condition",
            claims=claims,
            mode=knowledge_base_mode(settings.retrieval_modes, body.knowledge_id),
        ),
        web,
    )
    chunks = dify_chunks(
        done.result.chunks,
        web_chunks(done.web.items, web.max_results) if web else [],
        top_k=min(body.retrieval_setting.top_k, settings.max_top_k),
        score_threshold=body.retrieval_setting.score_threshold,
    )
    state.metrics.count_chunks(chunks)
    return RetrievalResponse(records=[to_record(c) for c in chunks])
