"""Dify custom tool: unified search with flat parameters, and its OpenAPI document."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from retrieval_svc.auth.identity import make_claims
from retrieval_svc.deps import ApiKeyDep, SettingsDep, StateDep
from retrieval_svc.languages import language
from retrieval_svc.merge import numbered_output
from retrieval_svc.retrieval import RetrievalQuery, WebRequest, answer, cut_query
from retrieval_svc.schemas import (
    ToolRequest,
    ToolSearchOutput,
    tool_filter,
    tool_knowledge_ids,
)
from retrieval_svc.tool_openapi import tool_openapi

router = APIRouter(prefix="/v1/tools", tags=["dify tool"])


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
            knowledge_ids=tool_knowledge_ids(body.knowledge_ids),
            top_k=body.top_k,
            score_threshold=body.score_threshold,
            filter=tool_filter(body.filter),
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
async def openapi_document(request: Request, settings: SettingsDep) -> dict[str, Any]:
    """The OpenAPI 3.0 document to import this service into Dify as a custom tool, its
    descriptions in the reader's language (Accept-Language, else RSVC_DEFAULT_LANGUAGE)."""
    asked = request.headers.get("accept-language")
    lang = language(asked, language(settings.default_language))
    return tool_openapi(settings.public_url, lang)
