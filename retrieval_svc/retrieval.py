"""One retrieval, whatever route it came through: principal, permission, filter, search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from retrieval_svc.auth.identity import Claims, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.auth.principal import Principal
from retrieval_svc.errors import AuthorizationFailed, KnowledgeBaseNotFound
from retrieval_svc.filters.tree import And, Condition, Not, Or
from retrieval_svc.search.engine import SearchResult
from retrieval_svc.state import AppState


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """What a caller asks for, already parsed."""

    query: str
    knowledge_ids: Sequence[str]
    top_k: int
    score_threshold: float = 0.0
    filter: And | Or | Not | Condition | None = None
    filter_path: str = "filter"
    claims: Claims = field(default_factory=Claims)


@dataclass(frozen=True, slots=True)
class Retrieval:
    """Who asked, and what they may see."""

    principal: Principal
    result: SearchResult


def authorize_knowledge_bases(
    state: AppState, key: ApiKeyConfig, principal: Principal, knowledge_ids: Sequence[str]
) -> None:
    """Refuse unless both the key's scope and the Casbin policy allow every knowledge base."""
    for kb in knowledge_ids:
        if not key.may_read(kb):
            raise AuthorizationFailed(f"API key {key.name!r} may not read knowledge base {kb!r}")
        decision = state.acl.kb_decision(
            tenant=principal.tenant,
            user_id=principal.user_id,
            roles=principal.roles,
            knowledge_id=kb,
        )
        if not decision.allowed:
            raise AuthorizationFailed(
                f"no policy lets this principal read knowledge base {kb!r} "
                f"in tenant {principal.tenant!r}"
            )


async def retrieve(state: AppState, key: ApiKeyConfig, q: RetrievalQuery) -> Retrieval:
    """Resolve the principal, check permission, compile the filter, search."""
    principal = resolve_principal(key, q.claims, state.acl)
    authorize_knowledge_bases(state, key, principal, q.knowledge_ids)
    filters = [] if q.filter is None else [await state.catalog.compile(q.filter, q.filter_path)]
    result = await state.engine.search(
        query=q.query,
        knowledge_ids=q.knowledge_ids,
        principal=principal,
        filters=filters,
        top_k=min(q.top_k, state.settings.max_top_k),
        score_threshold=q.score_threshold,
    )
    if not result.chunks:
        missing = [kb for kb in q.knowledge_ids if not await state.engine.knowledge_base_exists(kb)]
        if missing:
            names = ", ".join(repr(kb) for kb in missing)
            raise KnowledgeBaseNotFound(f"knowledge base {names} does not exist")
    return Retrieval(principal=principal, result=result)
