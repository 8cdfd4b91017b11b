"""Dify custom tool: unified search with flat parameters, and its OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter

from retrieval_svc.acl.values import ListValueError, parse_list
from retrieval_svc.auth.identity import make_claims
from retrieval_svc.deps import ApiKeyDep, SettingsDep, StateDep
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import parse_filter
from retrieval_svc.merge import numbered_output
from retrieval_svc.retrieval import RetrievalQuery, WebRequest, answer, cut_query
from retrieval_svc.schemas import MAX_KNOWLEDGE_IDS, ToolRequest, ToolSearchOutput
from retrieval_svc.tool_openapi import tool_openapi

router = APIRouter(prefix="/v1/tools", tags=["dify tool"])


def _knowledge_ids(value: str | list[str]) -> list[str]:
    try:
        ids = [str(v) for v in parse_list(value, what="knowledge_ids", max_items=MAX_KNOWLEDGE_IDS)]
    except ListValueError as exc:
        raise InvalidRequest(f"knowledge_ids: {exc}", path="knowledge_ids") from None
    if not ids:
        raise InvalidRequest(
            "knowledge_ids: name at least one knowledge base", path="knowledge_ids"
        )
    return ids


def _filter(value: str | dict[str, Any] | None) -> Any:
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return parse_filter(value)
    try:
        raw = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"filter: not valid JSON ({exc.msg})", path="filter") from None
    return parse_filter(raw)


@router.post("/unified-search", response_model=ToolSearchOutput)
async def unified_search(body: ToolRequest, key: ApiKeyDep, state: StateDep) -> dict[str, Any]:
    """Knowledge base (+ web) as the code node's output: formatted_chunks, chunk_metadata."""
    web = None
    max_web = body.web_max_results or state.settings.web_max_results
    if body.web:
        web = WebRequest(max_results=max_web)
    done = await answer(
        state,
        key,
        RetrievalQuery(
            query=cut_query(body.query, state.settings.max_query_chars),
            knowledge_ids=_knowledge_ids(body.knowledge_ids),
            top_k=body.top_k,
            score_threshold=body.score_threshold,
            filter=_filter(body.filter),
            claims=make_claims(body.user_id, body.user_roles, body.principal_token, path="body"),
            mode=body.mode,
        ),
        web,
    )
    found = done.retrieval
    return {
        **numbered_output(done.chunks),
        "meta": {
            "mode": found.result.mode,
            "web": {"status": found.web.status, "detail": found.web.detail if web else ""},
        },
    }


@router.get("/openapi.json")
async def openapi_document(settings: SettingsDep) -> dict[str, Any]:
    """The OpenAPI 3.0 document to import this service into Dify as a custom tool."""
    return tool_openapi(settings.public_url)
