"""The hybrid benchmark's ways of answering a query, each one call (I/O).

``raw_*`` send Elasticsearch exactly what the service sends, built by the service's own
functions with the service's default settings: BM25 is ``search_body``; hybrid is one
``_msearch`` of ``search_body`` and ``knn_body`` (tenant, ACL and filter inside
``knn.filter``), fused here by the service's ``fuse``; vector is ``knn_body`` alone. The raw
side is handed the query vector; what embedding the query costs is measured on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import orjson

from bench.hybrid.corpus import KNOWLEDGE_BASES
from bench.query.corpus import TENANT
from retrieval_svc.search.engine import HybridConfig
from retrieval_svc.search.fusion import Hit, fuse, vector_score
from retrieval_svc.search.query import knn_body, normalize_score, search_body
from retrieval_svc.settings import Settings

TOP_K = 10


def service_defaults() -> tuple[HybridConfig, float]:
    """The service's hybrid settings and BM25 saturation, as a default install has them."""
    f = Settings.model_fields
    config = HybridConfig(
        fusion=f["fusion"].default,
        vector_weight=f["fusion_vector_weight"].default,
        vector_floor=f["vector_score_floor"].default,
        rrf_k=f["rrf_k"].default,
        text_fields=f["bm25_fields"].default,
        candidates=f["hybrid_candidates"].default,
        num_candidates=f["knn_num_candidates"].default,
        oversample=f["knn_oversample"].default,
    )
    return config, float(f["score_saturation"].default)


@dataclass(frozen=True)
class Ask:
    """One query as a principal asks it, with the effective roles and compiled filters the raw
    side needs, and the query vector."""

    text: str
    roles: list[str]
    effective: frozenset[str]
    vector: np.ndarray
    knowledge_ids: list[str] = field(default_factory=lambda: list(KNOWLEDGE_BASES))
    filter: dict[str, Any] | None = None
    compiled: list[dict[str, Any]] = field(default_factory=list)


class HybridScenarios:
    """Calls returning (chunk ids in order, ES took in ms or None)."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        *,
        es_url: str,
        service_url: str,
        key: str,
        alias: str,
        config: HybridConfig,
        saturation: float,
    ) -> None:
        self.http, self.es_url, self.alias = http, es_url.rstrip("/"), alias
        self.service_url = service_url.rstrip("/")
        self.config, self.saturation = config, saturation
        self._auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def _post(self, url: str, data: bytes, headers: dict[str, str]) -> Any:
        async with self.http.post(url, data=data, headers=headers) as resp:
            payload = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{url}: {resp.status} {payload[:300]!r}")
        return orjson.loads(payload)

    def bm25_body(self, a: Ask, size: int) -> dict[str, Any]:
        return search_body(
            query=a.text,
            tenant=TENANT,
            knowledge_ids=a.knowledge_ids,
            roles=a.effective,
            filters=a.compiled,
            size=size,
            text_fields=self.config.text_fields,
        )

    def knn_body(self, a: Ask, k: int, **overrides: Any) -> dict[str, Any]:
        args: dict[str, Any] = {
            "num_candidates": self.config.num_candidates,
            "oversample": self.config.oversample,
            **overrides,
        }
        return knn_body(
            vector=a.vector.tolist(),
            tenant=TENANT,
            knowledge_ids=a.knowledge_ids,
            roles=a.effective,
            filters=a.compiled,
            k=k,
            **args,
        )

    async def search_raw(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.es_url}/{self.alias}/_search"
        out: dict[str, Any] = await self._post(
            url, orjson.dumps(body), {"Content-Type": "application/json"}
        )
        return out

    async def raw_bm25(self, a: Ask) -> tuple[list[str], int]:
        resp = await self.search_raw(self.bm25_body(a, TOP_K))
        return [h["_id"] for h in resp["hits"]["hits"]], int(resp["took"])

    async def raw_knn(self, a: Ask, **overrides: Any) -> tuple[list[str], int]:
        """The service's vector search, raw (``overrides``: other kNN parameters)."""
        resp = await self.search_raw(self.knn_body(a, TOP_K, **overrides))
        return [h["_id"] for h in resp["hits"]["hits"]], int(resp["took"])

    async def raw_hybrid(self, a: Ask) -> tuple[list[str], int]:
        k = max(TOP_K, self.config.candidates)
        header = orjson.dumps({"index": self.alias})
        lines = [header, orjson.dumps(self.bm25_body(a, k)), header]
        lines.append(orjson.dumps(self.knn_body(a, k)))
        data = b"\n".join(lines) + b"\n"
        resp = await self._post(
            f"{self.es_url}/_msearch", data, {"Content-Type": "application/x-ndjson"}
        )
        text, knn = resp["responses"]
        hits = fuse(
            self._hits(text, lambda s: normalize_score(s, self.saturation)),
            self._hits(knn, lambda s: vector_score(s, self.config.vector_floor)),
            method=self.config.fusion,
            vector_weight=self.config.vector_weight,
            rrf_k=self.config.rrf_k,
        )
        took = max(int(text["took"]), int(knn["took"]))
        return [h.id for h in hits[:TOP_K]], took

    @staticmethod
    def _hits(response: dict[str, Any], scorer: Any) -> list[Hit]:
        if "error" in response:
            raise RuntimeError(str(response["error"])[:300])
        return [
            Hit(h["_id"], h.get("_source") or {}, scorer(float(h["_score"])))
            for h in response["hits"]["hits"]
        ]

    async def service(self, a: Ask, mode: str) -> tuple[list[str], int]:
        body: dict[str, Any] = {
            "query": a.text,
            "knowledge_ids": a.knowledge_ids,
            "top_k": TOP_K,
            "mode": mode,
            "principal": {"roles": a.roles},
        }
        if a.filter:
            body["filter"] = a.filter
        out = await self._post(f"{self.service_url}/v1/search", orjson.dumps(body), self._auth)
        ids = [c["chunk_id"] for c in out["chunk_metadata"] if c["source_type"] == "rag"]
        return ids, int(out["meta"]["es_took_ms"])

    async def service_bm25(self, a: Ask) -> tuple[list[str], int]:
        return await self.service(a, "bm25")

    async def service_hybrid(self, a: Ask) -> tuple[list[str], int]:
        return await self.service(a, "hybrid")

    async def service_vector(self, a: Ask) -> tuple[list[str], int]:
        return await self.service(a, "vector")

    async def profile(self, a: Ask, **overrides: Any) -> int:
        """How many vectors Elasticsearch compared for this kNN search: about the number of
        visible chunks when it fell back to exact search, far fewer for a graph search."""
        body = {**self.knn_body(a, TOP_K, **overrides), "profile": True}
        resp = await self.search_raw(body)
        return sum(
            int(k.get("vector_operations_count", 0))
            for shard in resp["profile"]["shards"]
            for k in shard.get("dfs", {}).get("knn", [])
        )


def same_share(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> float:
    """Share of queries answered with the same ids in the same order."""
    return round(sum(list(x) == list(y) for x, y in zip(a, b, strict=True)) / max(len(a), 1), 4)
