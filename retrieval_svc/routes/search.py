"""The native search API."""

from __future__ import annotations

import time

from fastapi import APIRouter

from retrieval_svc.acl.values import ListValueError, parse_roles
from retrieval_svc.auth.identity import Claims
from retrieval_svc.deps import ApiKeyDep, StateDep
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import parse_filter
from retrieval_svc.merge import numbered_output
from retrieval_svc.retrieval import RetrievalQuery, retrieve
from retrieval_svc.schemas import PrincipalClaims, SearchMeta, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


def claims_from(principal: PrincipalClaims | None, path: str = "principal") -> Claims:
    """Claims from the native ``principal`` object."""
    if principal is None:
        return Claims()
    roles = None
    if principal.roles is not None:
        try:
            roles = tuple(parse_roles(principal.roles))
        except ListValueError as exc:
            raise InvalidRequest(f"{path}.roles: {exc}", path=f"{path}.roles") from None
    return Claims(user_id=principal.user_id, roles=roles, token=principal.token)


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, key: ApiKeyDep, state: StateDep) -> SearchResponse:
    """Search knowledge bases with a nested filter, as a principal; G-Cite numbered output."""
    started = time.perf_counter()
    tree = parse_filter(body.filter) if body.filter is not None else None
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
        ),
    )
    output = numbered_output(done.result.chunks)
    return SearchResponse(
        **output,
        meta=SearchMeta(
            took_ms=int((time.perf_counter() - started) * 1000),
            es_took_ms=done.result.took_ms,
        ),
    )
