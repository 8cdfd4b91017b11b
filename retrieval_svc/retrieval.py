"""One retrieval, whatever route it came through: principal, permission, filter, search, web,
then the merged and numbered chunks. Routes translate their request shapes into a
``RetrievalQuery`` and call ``answer``; they do nothing else with the results but render them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from retrieval_svc.access import authorize, explain_chunk, kb_access
from retrieval_svc.acl.identities import Identity
from retrieval_svc.auth.identity import Claims, principal_for, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode
from retrieval_svc.auth.principal import Principal
from retrieval_svc.chunks import UnifiedChunk, number_chunks
from retrieval_svc.deadline import remaining, within
from retrieval_svc.embedding import EmbeddingError
from retrieval_svc.errors import (
    AuthError,
    InvalidRequest,
    KnowledgeBaseNotFound,
    QueryRefused,
    SearchUnavailable,
    UnknownPrincipal,
)
from retrieval_svc.filters.dify import DifyFilter
from retrieval_svc.filters.tree import And, Condition, Not, Or
from retrieval_svc.merge import merge_within_top_k, ordered, web_chunks
from retrieval_svc.observability import current_request, log_fields
from retrieval_svc.search.engine import Mode, SearchResult
from retrieval_svc.search.rerank import RerankStatus
from retrieval_svc.state import AppState
from retrieval_svc.web.client import WebOutcome
from retrieval_svc.web.providers import Freshness
from retrieval_svc.words import say

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """What a caller asks for, already parsed."""

    query: str
    knowledge_ids: Sequence[str]
    top_k: int
    score_threshold: float = 0.0
    filter: And | Or | Not | Condition | DifyFilter | None = None
    filter_path: str = "filter"
    claims: Claims = field(default_factory=Claims)
    mode: Mode | None = None  # None: the configured default (per knowledge base for Dify)
    mode_path: str = "mode"
    actor: str | None = None  # who acts, for the audit trail; None: the key itself


@dataclass(frozen=True, slots=True)
class WebRequest:
    """Web results wanted alongside the knowledge-base search.

    ``within_top_k``: the answer holds at most ``top_k`` chunks, web ones included, and web
    chunks meet the score threshold (Dify's records); otherwise the knowledge base's
    ``top_k`` plus up to ``max_results`` web chunks (the G-Cite context).
    """

    max_results: int
    freshness: Freshness | None = None
    within_top_k: bool = False


def configured_web(state: AppState, knowledge_id: str) -> WebRequest | None:
    """Web records for a Dify request: Dify's request has no web switch, so the knowledge
    bases listed in ``RSVC_WEB_KNOWLEDGE_IDS`` get them (when a provider is configured)."""
    settings = state.settings
    if state.web.enabled and any(fnmatchcase(knowledge_id, p) for p in settings.web_knowledge_ids):
        return WebRequest(max_results=settings.web_max_results, within_top_k=True)
    return None


def knowledge_base_mode(modes: dict[str, Mode], knowledge_id: str) -> Mode | None:
    """The mode configured for a knowledge base (``RSVC_RETRIEVAL_MODES``, glob patterns; the
    longest matching pattern wins); None: the service default. Dify's request has no mode."""
    matching = [p for p in modes if fnmatchcase(knowledge_id, p)]
    return modes[max(matching, key=len)] if matching else None


@dataclass(frozen=True, slots=True)
class Retrieval:
    """Who asked, what they may see, and what web search did."""

    principal: Principal
    result: SearchResult
    web: WebOutcome = field(default_factory=lambda: WebOutcome(status="disabled"))
    rerank: RerankStatus = "disabled"


async def retrieve(
    state: AppState, key: ApiKeyConfig, q: RetrievalQuery, web: WebRequest | None = None
) -> Retrieval:
    """Resolve the principal and check permission, then search Elasticsearch and the web
    concurrently. Web trouble never fails the request; its outcome is reported."""
    log_fields(knowledge_ids=list(q.knowledge_ids), top_k=q.top_k, filtered=q.filter is not None)
    try:
        principal = await principal_for(key, q.claims, state.acl, state.oidc)
        authorize(state.acl, key, principal, q.knowledge_ids)
    except AuthError as exc:
        state.metrics.auth_failures.labels(reason=type(exc).__name__).inc()
        if isinstance(exc, UnknownPrincipal):
            _note_identity(state, key, exc.identity, q)
        raise
    log_fields(anonymous=principal.anonymous, roles=len(principal.roles))
    _note_identity(state, key, principal.identity, q)
    web_task: asyncio.Task[WebOutcome] | None = None
    if web is not None and state.web.enabled:  # (without a provider: reported below)
        web_task = asyncio.create_task(
            state.web.search(
                q.query,
                max_results=web.max_results,
                freshness=web.freshness,
                # Ends a little before the request does, so its timeout is reported, not fatal.
                timeout_s=remaining(state.settings.request_deadline_s) * 0.95,
            )
        )
    try:
        result, reranked = await _search(state, principal, q)
    except BaseException:
        if web_task is not None:
            web_task.cancel()
        raise
    if web_task is not None:
        outcome = await web_task
    elif web is not None:  # asked for, but nothing to ask: say so rather than stay silent
        outcome = WebOutcome(
            status="disabled",
            detail="web search was asked for, but no provider is configured "
            "(RSVC_WEB_PROVIDER and RSVC_WEB_API_KEY)",
        )
    else:
        outcome = WebOutcome(status="disabled")
    log_fields(
        rag_chunks=len(result.chunks),
        es_took_ms=result.took_ms,
        web=outcome.status,
        web_items=len(outcome.items),
        web_ms=outcome.took_ms,
    )
    return Retrieval(principal=principal, result=result, web=outcome, rerank=reranked)


def _note_identity(
    state: AppState, key: ApiKeyConfig, identity: Identity, q: RetrievalQuery
) -> None:
    """Mark what the user id resolved to in the request's log line; one that named no one
    also in the metric and the console's list (not an operator's *Search as*)."""
    if identity.status != "none":
        log_fields(identity=identity.status)
    if identity.unresolved and q.actor is None:
        state.metrics.unknown_principals.labels(key=key.name, status=identity.status).inc()
        state.unknown_users.saw(key.tenant, key.name, identity)


@dataclass(frozen=True, slots=True)
class Answer:
    """The chunks a caller gets, merged and numbered (``[C:1]`` …), and what happened."""

    chunks: list[UnifiedChunk]
    retrieval: Retrieval
    took_ms: int


async def answer(
    state: AppState, key: ApiKeyConfig, q: RetrievalQuery, web: WebRequest | None = None
) -> Answer:
    """``retrieve``, then knowledge-base and web chunks merged, numbered once and counted."""
    started = time.perf_counter()
    async with within(state.settings.request_deadline_s):  # every call below included
        done = await retrieve(state, key, q, web)
    found = web_chunks(done.web.items, web.max_results) if web is not None else []
    if web is not None and web.within_top_k:
        chunks = merge_within_top_k(
            done.result.chunks,
            found,
            top_k=min(q.top_k, state.settings.max_top_k),
            score_threshold=q.score_threshold,
        )
    else:
        chunks = number_chunks(ordered([*done.result.chunks, *found]))
    state.metrics.count_chunks(chunks)
    audit_event(
        state, key, done.principal, q.knowledge_ids, done.result.mode, chunks, q.query, q.actor
    )
    return Answer(chunks, done, int((time.perf_counter() - started) * 1000))


def audit_event(
    state: AppState,
    key: ApiKeyConfig,
    principal: Principal,
    knowledge_ids: Sequence[str],
    mode: str,
    chunks: Sequence[UnifiedChunk],
    query: str = "",
    actor: str | None = None,
) -> None:
    """The audit event of one read (a retrieval, a listing, a document read) by this request;
    never raises, never waits. ``actor``: who acted (default ``key:<the key's name>``); the
    principal's user is the subject."""
    request_id, route = current_request()
    key_name = principal.key_name or key.name
    state.audit.record(
        key=key_name,
        actor=actor or f"key:{key_name}",
        tenant=principal.tenant,
        user_id=principal.user_id,
        roles=len(principal.roles),
        knowledge_ids=knowledge_ids,
        mode=mode,
        chunks=chunks,
        request_id=request_id,
        route=route,
        query=query,
        identity=principal.identity.status,
    )


def cut_query(query: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of a query Dify sent (it sets no bound); the cut is
    logged (its length, never its text)."""
    if len(query) <= max_chars:
        return query
    log.info(say("log_query_cut", n=len(query), max=max_chars))
    log_fields(query_cut_from=len(query))
    return query[:max_chars]


def resolve_mode(state: AppState, q: RetrievalQuery) -> Mode:
    """The mode to run: asked for, else the configured one; hybrid without an embedder is BM25."""
    mode = q.mode or state.settings.retrieval_mode
    if state.query_vectors is None:
        if q.mode == "vector":
            raise InvalidRequest(
                "mode 'vector' needs an embedder, and this service runs with RSVC_EMBEDDER=none",
                path=q.mode_path,
            )
        return "bm25"
    return mode


async def _query_vector(state: AppState, mode: Mode, query: str) -> list[float] | None:
    """The query's embedding for vector or hybrid mode; hybrid falls back to BM25 without it."""
    if mode == "bm25" or state.query_vectors is None:
        return None
    try:
        return await state.query_vectors.vector(query)
    except EmbeddingError as exc:
        state.metrics.embedding_failures.inc()
        if mode == "vector":
            raise SearchUnavailable(f"the embedding model is unavailable: {exc}") from exc
        log.warning(say("log_embedding_failed", why=exc))
        return None


async def _search(
    state: AppState, principal: Principal, q: RetrievalQuery
) -> tuple[SearchResult, RerankStatus]:
    filters = []
    if q.filter is not None:
        filters.append(
            await state.catalog.compile(
                q.filter,
                q.filter_path,
                tenant=principal.tenant,
                knowledge_ids=q.knowledge_ids,
                roles=principal.roles,
            )
        )
    mode = resolve_mode(state, q)
    vector = await _query_vector(state, mode, q.query)
    top_k = min(q.top_k, state.settings.max_top_k)
    reranker = state.reranker if state.reranker is not None and state.reranker.enabled else None
    try:
        result = await state.engine.search(
            query=q.query,
            knowledge_ids=q.knowledge_ids,
            principal=principal,
            filters=filters,
            # A reranker reorders the fused top-N and scores it anew: the threshold waits.
            top_k=max(top_k, reranker.top_n) if reranker else top_k,
            score_threshold=0.0 if reranker else q.score_threshold,
            mode=mode if vector is not None else "bm25",
            vector=vector,
        )
    except QueryRefused as exc:  # a value the index cannot take: the caller's filter or query
        exc.path = q.filter_path if q.filter is not None else "query"
        raise
    log_fields(mode=result.mode)
    status: RerankStatus = "disabled"
    if reranker is not None and result.chunks:
        left = remaining(state.settings.request_deadline_s) * 0.95
        done = await reranker.rerank(q.query, result.chunks, timeout_s=max(0.05, left))
        state.metrics.rerank_seconds.labels(outcome=done.status).observe(done.took_ms / 1000)
        status = done.status
        if done.status != "ok":
            log.warning(say("log_rerank", status=done.status, detail=done.detail))
        kept = [c for c in done.chunks if c.score >= q.score_threshold][:top_k]
        result = replace(result, chunks=kept)
        log_fields(rerank=done.status, rerank_ms=done.took_ms)
    if not result.chunks:
        missing = await state.engine.missing_knowledge_bases(principal.tenant, q.knowledge_ids)
        if missing:
            raise KnowledgeBaseNotFound(f"knowledge base {echoed(missing)} does not exist")
    return result, status


def identity_view(identity: Identity) -> dict[str, Any]:
    """How ``/v1/explain`` and the console show what a user id resolved to."""
    return {
        "status": identity.status,
        "asked": identity.asked,
        "person": identity.person,
        "via": identity.via,
    }


ECHO_NAMES, ECHO_CHARS = 5, 64  # what an error repeats of the names a caller sent


def echoed(names: Sequence[str]) -> str:
    """``names`` as an error message repeats them: at most ``ECHO_NAMES``, each cut to
    ``ECHO_CHARS`` characters, so an answer never grows with what the caller sent."""
    shown = [repr(n if len(n) <= ECHO_CHARS else n[:ECHO_CHARS] + "…") for n in names[:ECHO_NAMES]]
    more = len(names) - ECHO_NAMES
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


async def explain_visibility(
    state: AppState,
    key: ApiKeyConfig,
    claims: Claims,
    *,
    chunk_id: str | None = None,
    document_id: str | None = None,
) -> dict[str, Any]:
    """For a principal of an admin key's tenant and a chunk or document: visible or not, and
    by which rule (``/v1/explain`` and the console's *Why not* both ask this). It sees what
    the key could retrieve, no more: a chunk of a knowledge base outside the key's scope is
    not found, exactly like one that does not exist."""
    # An admin key describes any principal of its tenant, as a trusted backend would.
    as_trusted = key.model_copy(update={"mode": IdentityMode.TRUSTED, "unknown_user": "public"})
    principal = resolve_principal(as_trusted, claims, state.acl)
    sources = await state.engine.get_chunks(
        tenant=principal.tenant, chunk_id=chunk_id, document_id=document_id
    )
    chunks = [
        explain_chunk(source, principal, kb_access(state.acl, key, principal, kb))
        for source in sources
        if key.may_read(kb := str(source.get("knowledge_id", "")))
    ]
    return {
        "principal": {
            "tenant": principal.tenant,
            "user_id": principal.user_id,
            "effective_roles": sorted(principal.roles),
            "identity": identity_view(principal.identity),
        },
        "found": bool(chunks),
        "chunks": chunks,
    }
