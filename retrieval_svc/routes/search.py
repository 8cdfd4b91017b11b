"""The native search API."""

from __future__ import annotations

import time

from fastapi import APIRouter

from retrieval_svc.acl.values import ListValueError, parse_roles
from retrieval_svc.auth.identity import Claims
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import parse_filter
from retrieval_svc.merge import merge, numbered_output
from retrieval_svc.retrieval import Retrieval, RetrievalQuery, WebRequest, retrieve
from retrieval_svc.schemas import (
    PrincipalClaims,
    SearchMeta,
    SearchRequest,
    SearchResponse,
    WebMeta,
)
from retrieval_svc.state import AppState

router = APIRouter(prefix="/v1", tags=["search"])


def claims_from(principal: PrincipalClaims | None, path: str = "principal") -> Claims:
    """Claims from the native ``principal`` object."""
    if principal is None:
        return Claims()
    return make_claims(principal.user_id, principal.roles, principal.token, path)


def make_claims(user_id: str | None, roles: object, token: str | None, path: str) -> Claims:
    """Claims from loose parts; empty strings mean "not sent"."""
    parsed = None
    if roles is not None and roles != "":
        try:
            parsed = tuple(parse_roles(roles))
        except ListValueError as exc:
            raise InvalidRequest(f"{path}.roles: {exc}", path=f"{path}.roles") from None
    return Claims(user_id=user_id or None, roles=parsed, token=token or None)


def merged_output(state: AppState, done: Retrieval, max_web_results: int) -> dict[str, object]:
    """Knowledge-base and web chunks merged, numbered and formatted (and counted)."""
    chunks = merge(done.result.chunks, done.web.items, max_web_results)
    state.metrics.count_chunks(chunks)
    return numbered_output(chunks)


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, key: ApiKeyDep, state: StateDep) -> SearchResponse:
    """Search knowledge bases with a nested filter, as a principal; G-Cite numbered output."""
    started = time.perf_counter()
    tree = parse_filter(body.filter) if body.filter is not None else None
    web = None
    if body.web is not None and body.web.enabled:
        web = WebRequest(
            max_results=body.web.max_results or state.settings.web_max_results,
            freshness=body.web.freshness,
        )
    done = await retrieve(
        state,
        key,
        RetrievalQuery(
            query=body.query,
            knowledge_ids=body.knowledge_ids,
            top_k=body.top_k,
            score_threshold=body.score_threshold,
            filter=tree,
            claims=claims_from(body.principal),
            mode=body.mode,
        ),
        web,
    )
    output = merged_output(state, done, web.max_results if web else 0)
    return SearchResponse.model_validate(
        {
            **output,
            "meta": SearchMeta(
                took_ms=int((time.perf_counter() - started) * 1000),
                es_took_ms=done.result.took_ms,
                mode=done.result.mode,
                rerank=done.rerank,
                web=WebMeta(
                    status=done.web.status, provider=done.web.provider, took_ms=done.web.took_ms
                ),
            ),
        }
    )
