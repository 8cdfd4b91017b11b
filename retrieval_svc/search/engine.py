"""Running retrievals against Elasticsearch, with the ACL re-checked on every hit.

Elasticsearch and transport exceptions are translated into service errors here, at the one
place they are raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    TransportError,
)

from retrieval_svc.acl import is_visible, stored_roles
from retrieval_svc.auth.principal import Principal
from retrieval_svc.chunks import UnifiedChunk, chunk_from_source
from retrieval_svc.errors import DeadlineExceeded, SearchUnavailable
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.query import normalize_score, raw_score_floor, search_body

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Chunks in relevance order, and what Elasticsearch reported."""

    chunks: list[UnifiedChunk]
    took_ms: int


class SearchEngine:
    """Knowledge-base retrieval through the index alias."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        *,
        alias: str,
        saturation: float,
        deadline_s: float,
        metrics: Metrics,
    ) -> None:
        self._es = es
        self._alias = alias
        self._saturation = saturation
        self._deadline_s = deadline_s
        self._metrics = metrics

    async def search(
        self,
        *,
        query: str,
        knowledge_ids: Sequence[str],
        principal: Principal,
        filters: Sequence[dict[str, Any]] = (),
        top_k: int,
        score_threshold: float = 0.0,
    ) -> SearchResult:
        """The top ``top_k`` chunks visible to ``principal`` scoring at least the threshold."""
        body = search_body(
            query=query,
            knowledge_ids=knowledge_ids,
            roles=principal.roles,
            filters=filters,
            size=top_k,
            min_score=raw_score_floor(score_threshold, self._saturation),
        )
        if body.get("min_score") == float("inf"):
            return SearchResult(chunks=[], took_ms=0)
        response = await self._call("search", self._es.search(index=self._alias, **body))
        chunks: list[UnifiedChunk] = []
        for hit in response["hits"]["hits"]:
            source: dict[str, Any] = hit.get("_source") or {}
            if not is_visible(stored_roles(source), principal.roles):
                self._metrics.acl_postcheck_drops.inc()
                log.error(
                    "ACL post-check dropped chunk %s for key %s: the query let it through",
                    hit.get("_id"),
                    principal.key_name,
                )
                continue
            score = normalize_score(float(hit.get("_score") or 0.0), self._saturation)
            if score < score_threshold:
                continue
            chunks.append(chunk_from_source(source, score))
        return SearchResult(chunks=chunks, took_ms=int(response.get("took", 0)))

    async def knowledge_base_exists(self, knowledge_id: str) -> bool:
        """Whether any chunk of ``knowledge_id`` is indexed (visible or not)."""
        response = await self._call(
            "count",
            self._es.count(index=self._alias, query={"term": {"knowledge_id": knowledge_id}}),
        )
        return int(response["count"]) > 0

    async def get_mappings(self) -> dict[str, Any]:
        """The mappings of every index behind the alias."""
        response = await self._call("get_mapping", self._es.indices.get_mapping(index=self._alias))
        return dict(response)

    async def get_chunks(
        self, *, chunk_id: str | None, document_id: str | None
    ) -> list[dict[str, Any]]:
        """Stored chunks by chunk id or document id (every one, visible or not)."""
        field, value = ("chunk_id", chunk_id) if chunk_id else ("document_id", document_id)
        response = await self._call(
            "get_chunks",
            self._es.search(
                index=self._alias,
                query={"term": {field: value}},
                size=100,
                sort=[{"segment_position": "asc"}],
                source_excludes=["embedding"],
            ),
        )
        return [hit["_source"] for hit in response["hits"]["hits"]]

    async def _call(self, operation: str, request: Any) -> Any:
        started = time.perf_counter()
        outcome = "ok"
        try:
            async with asyncio.timeout(self._deadline_s):
                return await request
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
                f"the index alias {self._alias!r} does not exist; run `retrieval-indexer init`"
            )
        if isinstance(exc, ConnectionError | TransportError):
            return SearchUnavailable("Elasticsearch is unreachable")
        if isinstance(exc, ApiError) and (exc.meta.status >= 500 or exc.meta.status == 429):
            return SearchUnavailable(f"Elasticsearch failed ({exc.meta.status})")
        return exc
