"""Running retrievals against Elasticsearch, with the ACL re-checked on every hit.

Elasticsearch and transport exceptions are translated into service errors here, at the one
place they are raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from elastic_transport import SerializationError
from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    TransportError,
)

from retrieval_svc.acl import acl_query, in_tenant, is_visible, stored_roles, tenant_query
from retrieval_svc.auth.principal import Principal
from retrieval_svc.chunks import UnifiedChunk, chunk_from_source
from retrieval_svc.deadline import remaining
from retrieval_svc.errors import DeadlineExceeded, QueryRefused, SearchUnavailable
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.failures import Reachability, refusal
from retrieval_svc.search.fusion import FusionMethod, Hit, fuse, vector_score
from retrieval_svc.search.query import (
    SOURCE_EXCLUDES,
    TextFields,
    knn_body,
    normalize_score,
    raw_score_floor,
    search_body,
)
from retrieval_svc.tenancy import tenant_alias

Mode = Literal["hybrid", "bm25", "vector"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Chunks in relevance order, and what Elasticsearch reported."""

    chunks: list[UnifiedChunk]
    took_ms: int
    mode: Mode = "bm25"


@dataclass(frozen=True, slots=True)
class HybridConfig:
    """How vector and hybrid retrieval score and fuse (settings ``fusion``, ``rrf_k``, …)."""

    fusion: FusionMethod = "linear"
    vector_weight: float = 0.3
    vector_floor: float = 0.8
    rrf_k: int = 60
    text_fields: TextFields = "both"  # BM25 on the bigram view, the jieba view, or both
    candidates: int = 50  # hits taken from each list before fusion
    num_candidates: int = 200  # HNSW candidates per shard (recall vs speed)
    oversample: float = 3.0  # rescore k × this many neighbours with full-precision vectors


class SearchEngine:
    """Knowledge-base retrieval, each tenant's through its own alias (``tenant_alias``)."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        *,
        alias: str,
        saturation: float,
        deadline_s: float,
        metrics: Metrics,
        hybrid: HybridConfig | None = None,
    ) -> None:
        self._es = es
        self._alias = alias  # the prefix of every tenant's alias
        self._saturation = saturation
        self._deadline_s = deadline_s
        self._metrics = metrics
        self._hybrid = hybrid or HybridConfig()
        self.reachability = Reachability()

    def index(self, tenant: str) -> str:
        """The alias ``tenant``'s chunks are read through."""
        return tenant_alias(self._alias, tenant)

    async def search(
        self,
        *,
        query: str,
        knowledge_ids: Sequence[str],
        principal: Principal,
        filters: Sequence[dict[str, Any]] = (),
        top_k: int,
        score_threshold: float = 0.0,
        mode: Mode = "bm25",
        vector: Sequence[float] | None = None,
    ) -> SearchResult:
        """The top ``top_k`` chunks visible to ``principal`` scoring at least the threshold.

        ``bm25`` is one search; ``vector`` one kNN search; ``hybrid`` both in one ``_msearch``,
        fused here. Every hit of every list passes the ACL post-check before it is used.
        """
        if mode != "bm25" and vector is not None:
            return await self._semantic(
                mode=mode,
                query=query,
                vector=vector,
                knowledge_ids=knowledge_ids,
                principal=principal,
                filters=filters,
                top_k=top_k,
                score_threshold=score_threshold,
            )
        body = search_body(
            query=query,
            tenant=principal.tenant,
            knowledge_ids=knowledge_ids,
            roles=principal.roles,
            filters=filters,
            size=top_k,
            min_score=raw_score_floor(score_threshold, self._saturation),
            text_fields=self._hybrid.text_fields,
        )
        if body.get("min_score") == float("inf"):
            return SearchResult(chunks=[], took_ms=0)
        response = await self._call(
            "search", self._es.search(index=self.index(principal.tenant), **body)
        )
        hits = self._visible(response, principal, self._bm25_score)
        chunks = [chunk_from_source(h.source, h.score) for h in hits if h.score >= score_threshold]
        return SearchResult(chunks=chunks, took_ms=int(response.get("took", 0)), mode="bm25")

    def _bm25_score(self, raw: float) -> float:
        return normalize_score(raw, self._saturation)

    def _vector_score(self, raw: float) -> float:
        return vector_score(raw, self._hybrid.vector_floor)

    async def _semantic(
        self,
        *,
        mode: Mode,
        query: str,
        vector: Sequence[float],
        knowledge_ids: Sequence[str],
        principal: Principal,
        filters: Sequence[dict[str, Any]],
        top_k: int,
        score_threshold: float,
    ) -> SearchResult:
        cfg = self._hybrid
        k = max(top_k, cfg.candidates) if mode == "hybrid" else top_k
        knn = knn_body(
            vector=vector,
            tenant=principal.tenant,
            knowledge_ids=knowledge_ids,
            roles=principal.roles,
            filters=filters,
            k=k,
            num_candidates=cfg.num_candidates,
            oversample=cfg.oversample,
        )
        if mode == "vector":
            response = await self._call(
                "knn", self._es.search(index=self.index(principal.tenant), **knn)
            )
            hits = self._visible(response, principal, self._vector_score)
            took = int(response.get("took", 0))
        else:
            bm25 = search_body(
                query=query,
                tenant=principal.tenant,
                knowledge_ids=knowledge_ids,
                roles=principal.roles,
                filters=filters,
                size=k,
                text_fields=cfg.text_fields,
            )
            header = {"index": self.index(principal.tenant)}
            response = await self._call(
                "msearch", self._es.msearch(searches=[header, bm25, header, knn])
            )
            text_resp, knn_resp = (self._checked(r) for r in response["responses"])
            hits = fuse(
                self._visible(text_resp, principal, self._bm25_score),
                self._visible(knn_resp, principal, self._vector_score),
                method=cfg.fusion,
                vector_weight=cfg.vector_weight,
                rrf_k=cfg.rrf_k,
            )
            # The two searches of an _msearch run side by side: the longer is their time.
            took = max(int(text_resp.get("took", 0)), int(knn_resp.get("took", 0)))
        chunks = [chunk_from_source(h.source, h.score) for h in hits if h.score >= score_threshold]
        return SearchResult(chunks=chunks[:top_k], took_ms=took, mode=mode)

    @staticmethod
    def _checked(response: dict[str, Any]) -> dict[str, Any]:
        """One ``_msearch`` answer, or the service error its failure means."""
        if "error" not in response:
            return response
        raise refusal(int(response.get("status", 500)), response.get("error"))

    def _visible(
        self, response: dict[str, Any], principal: Principal, scorer: Callable[[float], float]
    ) -> list[Hit]:
        """The hits the ACL post-check lets through, scored into [0, 1] by ``scorer``."""
        out: list[Hit] = []
        for hit in response["hits"]["hits"]:
            source: dict[str, Any] = hit.get("_source") or {}
            if not (
                in_tenant(source, principal.tenant)
                and is_visible(stored_roles(source), principal.roles)
            ):
                self._metrics.acl_postcheck_drops.inc()
                log.error(
                    "ACL post-check dropped chunk %s for key %s: the query let it through",
                    hit.get("_id"),
                    principal.key_name,
                )
                continue
            out.append(Hit(str(hit.get("_id")), source, scorer(float(hit.get("_score") or 0.0))))
        return out

    async def missing_knowledge_bases(self, tenant: str, knowledge_ids: Sequence[str]) -> list[str]:
        """Which of ``knowledge_ids`` hold no chunk in ``tenant`` (visible or not), in one
        request; another tenant's knowledge base of the same id does not count."""
        wanted = sorted(set(knowledge_ids))
        response = await self._call(
            "knowledge_bases",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant)]}},
                aggs={
                    "kb": {
                        "terms": {"field": "knowledge_id", "include": wanted, "size": len(wanted)}
                    }
                },
            ),
        )
        present = {b["key"] for b in response["aggregations"]["kb"]["buckets"]}
        return [kb for kb in knowledge_ids if kb not in present]

    async def knowledge_bases(self, tenant: str, roles: Collection[str]) -> list[dict[str, Any]]:
        """``tenant``'s knowledge bases that hold a chunk visible to holders of ``roles``, each
        with its display name and the documents and chunks visible (one request)."""
        response = await self._call(
            "knowledge_bases",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant), acl_query(roles)]}},
                aggs={
                    "kb": {
                        "terms": {"field": "knowledge_id", "size": 1000},
                        "aggs": {
                            "documents": {"cardinality": {"field": "document_id"}},
                            "name": {"terms": {"field": "dataset_name", "size": 1}},
                        },
                    }
                },
            ),
        )
        return [
            {
                "knowledge_id": b["key"],
                "name": next((n["key"] for n in b["name"]["buckets"]), b["key"]),
                "documents": b["documents"]["value"],
                "chunks": b["doc_count"],
            }
            for b in response["aggregations"]["kb"]["buckets"]
        ]

    async def tenant_overview(self, tenant: str) -> dict[str, Any]:
        """For an operator: every role the tenant's chunks name, and per knowledge base its
        documents, chunks, restricted chunks and last indexing time (one request)."""
        response = await self._call(
            "tenant_overview",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant)]}},
                aggs={
                    "roles": {"terms": {"field": "access_roles", "size": 10_000}},
                    "kb": {
                        "terms": {"field": "knowledge_id", "size": 1000},
                        "aggs": {
                            "documents": {"cardinality": {"field": "document_id"}},
                            "restricted": {"filter": {"exists": {"field": "access_roles"}}},
                            "last_indexed": {"max": {"field": "indexed_at"}},
                            "name": {"terms": {"field": "dataset_name", "size": 1}},
                        },
                    },
                },
            ),
        )
        aggs = response["aggregations"]
        return {
            "roles": sorted(b["key"] for b in aggs["roles"]["buckets"]),
            "knowledge_bases": [
                {
                    "knowledge_id": b["key"],
                    "name": next((n["key"] for n in b["name"]["buckets"]), b["key"]),
                    "documents": b["documents"]["value"],
                    "chunks": b["doc_count"],
                    "restricted": b["restricted"]["doc_count"],
                    "last_indexed": b["last_indexed"].get("value_as_string"),
                }
                for b in aggs["kb"]["buckets"]
            ],
        }

    async def fields_present(
        self,
        tenant: str,
        knowledge_ids: Sequence[str],
        roles: Collection[str],
        paths: Sequence[str],
    ) -> list[str]:
        """Which of ``paths`` some chunk of ``tenant``'s ``knowledge_ids`` visible to holders
        of ``roles`` has (one request): a field only invisible chunks have is not listed."""
        if not paths:
            return []
        scope = [
            tenant_query(tenant),
            {"terms": {"knowledge_id": sorted(knowledge_ids)}},
            acl_query(roles),
        ]
        response = await self._call(
            "fields_present",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": scope}},
                aggs={"f": {"filters": {"filters": {p: {"exists": {"field": p}} for p in paths}}}},
            ),
        )
        buckets = response["aggregations"]["f"]["buckets"]
        return [p for p in paths if buckets.get(p, {}).get("doc_count", 0) > 0]

    async def get_mappings(self, tenant: str) -> dict[str, Any]:
        """The mappings of ``tenant``'s indices (no other tenant's fields are in them)."""
        response = await self._call(
            "get_mapping", self._es.indices.get_mapping(index=self.index(tenant))
        )
        return dict(response)

    async def get_chunks(
        self, *, tenant: str, chunk_id: str | None, document_id: str | None
    ) -> list[dict[str, Any]]:
        """Stored chunks of ``tenant`` by chunk id or document id (visible or not)."""
        field, value = ("chunk_id", chunk_id) if chunk_id else ("document_id", document_id)
        response = await self._call(
            "get_chunks",
            self._es.search(
                index=self.index(tenant),
                query={"bool": {"filter": [tenant_query(tenant), {"term": {field: value}}]}},
                size=100,
                sort=[{"segment_position": "asc"}],
                source_excludes=list(SOURCE_EXCLUDES),
            ),
        )
        return [hit["_source"] for hit in response["hits"]["hits"]]

    async def _call(self, operation: str, request: Any) -> Any:
        started = time.perf_counter()
        outcome = "ok"
        try:
            async with asyncio.timeout(max(0.0, remaining(self._deadline_s))):
                response = await request
            self.reachability.reached()
            return response
        except BaseException as exc:
            outcome = type(exc).__name__
            translated = self._translate(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            self._metrics.es_seconds.labels(operation=operation, outcome=outcome).observe(
                time.perf_counter() - started
            )

    def _translate(self, exc: BaseException) -> BaseException:
        """The service error for an Elasticsearch or transport failure (else ``exc``)."""
        if isinstance(exc, TimeoutError | ConnectionTimeout):
            return DeadlineExceeded("Elasticsearch did not answer within the deadline")
        if isinstance(exc, NotFoundError):
            return SearchUnavailable(
                "the tenant's index does not exist; run `retrieval-indexer init --tenant …`"
            )
        if isinstance(exc, SerializationError):  # a value the client cannot write as JSON
            log.warning("a query could not be serialised: %s", exc)
            return QueryRefused("a value of the request cannot be sent to the index")
        if isinstance(exc, ConnectionError | TransportError):
            self.reachability.failed(type(exc).__name__)
            return SearchUnavailable("Elasticsearch is unreachable")
        if isinstance(exc, ApiError):
            return refusal(exc.meta.status, exc.body.get("error") if exc.body else None)
        return exc
