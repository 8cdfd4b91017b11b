"""Running retrievals against Elasticsearch, with the ACL re-checked on every hit.

The other reads of a tenant's index are in ``tenant_reads``; every call goes through
``calls.ElasticCalls``, which translates Elasticsearch's failures into service errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from elasticsearch import (
    AsyncElasticsearch,
)

from retrieval_svc.acl import chunk_visible, in_tenant
from retrieval_svc.auth.principal import Principal
from retrieval_svc.chunks import UnifiedChunk, chunk_from_source
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.failures import refusal
from retrieval_svc.search.fusion import FusionMethod, Hit, fuse, vector_score
from retrieval_svc.search.query import (
    TextFields,
    knn_body,
    normalize_score,
    raw_score_floor,
    search_body,
)
from retrieval_svc.search.tenant_reads import TenantReads
from retrieval_svc.words import say

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
    num_candidates: int = 500  # HNSW candidates per shard, at least (``candidates_for``)
    oversample: float = 3.0  # rescore k × this many neighbours with full-precision vectors


class SearchEngine(TenantReads):
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
        super().__init__(es, alias=alias, deadline_s=deadline_s, metrics=metrics)
        self._saturation = saturation
        self._hybrid = hybrid or HybridConfig()

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
            "search", self._searches.search(self.index(principal.tenant), body)
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
                "knn", self._searches.search(self.index(principal.tenant), knn)
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
                "msearch", self._searches.msearch([header, bm25, header, knn])
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
            if not (in_tenant(source, principal.tenant) and chunk_visible(source, principal.roles)):
                self._metrics.acl_postcheck_drops.inc()
                log.error(
                    say("log_postcheck_dropped", chunk=hit.get("_id"), api_key=principal.key_name)
                )
                continue
            out.append(Hit(str(hit.get("_id")), source, scorer(float(hit.get("_score") or 0.0))))
        return out
