"""Dify's External Knowledge API."""

from __future__ import annotations

from fastapi import APIRouter

from retrieval_svc.auth.principal import key_principal
from retrieval_svc.chunks import number_chunks
from retrieval_svc.deps import ApiKeyDep, EngineDep, SettingsDep
from retrieval_svc.dify.records import to_record
from retrieval_svc.dify.schemas import RetrievalRequest, RetrievalResponse
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest, KnowledgeBaseNotFound

router = APIRouter(tags=["dify"])


@router.post("/retrieval", response_model=RetrievalResponse)
async def retrieval(
    body: RetrievalRequest, key: ApiKeyDep, engine: EngineDep, settings: SettingsDep
) -> RetrievalResponse:
    """Retrieve chunks of one knowledge base for Dify's knowledge-retrieval node."""
    if not key.may_read(body.knowledge_id):
        raise AuthorizationFailed(f"this API key may not read knowledge base {body.knowledge_id!r}")
    if body.metadata_condition and body.metadata_condition.conditions:
        raise InvalidRequest(
            "metadata_condition is not supported yet", path="metadata_condition.conditions"
        )
    principal = key_principal(key)
    result = await engine.search(
        query=body.query,
        knowledge_ids=[body.knowledge_id],
        principal=principal,
        top_k=min(body.retrieval_setting.top_k, settings.max_top_k),
        score_threshold=body.retrieval_setting.score_threshold,
    )
    if not result.chunks and not await engine.knowledge_base_exists(body.knowledge_id):
        raise KnowledgeBaseNotFound(f"knowledge base {body.knowledge_id!r} does not exist")
    return RetrievalResponse(records=[to_record(c) for c in number_chunks(result.chunks)])
