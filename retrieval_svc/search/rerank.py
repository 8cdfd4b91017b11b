"""Optional reranking of the fused top-N by a cross-encoder behind a rerank endpoint.

The endpoint speaks the Cohere / Jina format that Xinference, vLLM and others serve at
``/v1/rerank``: ``{"model", "query", "documents": [text, ...], "top_n"}`` →
``{"results": [{"index", "relevance_score"}, ...]}``. Like web search, a reranker can only
slow a request down to its deadline, never fail it: on a timeout, an error or an unreadable
answer the fused order stands and the outcome says why.

Scores: a reranked passage's score is the reranker's relevance, which Cohere- and Jina-style
servers give in [0, 1]; a server that answers raw logits has them passed through a logistic
so the score stays in [0, 1] and ``score_threshold`` keeps a meaning.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import httpx

from retrieval_svc.chunks import UnifiedChunk

RerankStatus = Literal["ok", "disabled", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class RerankConfig:
    """Where the rerank endpoint is, and how much of the fused list it reorders."""

    url: str | None = None  # the full endpoint, e.g. http://xinference:9997/v1/rerank
    model: str | None = None
    api_key: str | None = None
    top_n: int = 20
    timeout_s: float = 2.0


@dataclass(frozen=True, slots=True)
class RerankOutcome:
    """What reranking did: the chunks in their new order, or the old one and why."""

    status: RerankStatus
    chunks: list[UnifiedChunk] = field(default_factory=list)
    took_ms: int = 0
    detail: str = ""


def _unit(score: float) -> float:
    return score if 0.0 <= score <= 1.0 else 1.0 / (1.0 + math.exp(-score))


class Reranker:
    """Calls the rerank endpoint; never raises for its trouble."""

    def __init__(self, http: httpx.AsyncClient, config: RerankConfig) -> None:
        self._http = http
        self._config = config

    @property
    def enabled(self) -> bool:
        """Whether an endpoint is configured."""
        return bool(self._config.url)

    @property
    def top_n(self) -> int:
        """How many fused passages are handed to the reranker."""
        return self._config.top_n

    async def rerank(
        self, query: str, chunks: Sequence[UnifiedChunk], *, timeout_s: float
    ) -> RerankOutcome:
        """``chunks`` (the fused top-N) reordered by relevance to ``query``."""
        cfg = self._config
        if not cfg.url or not chunks:
            return RerankOutcome("disabled", list(chunks))
        started = time.perf_counter()
        body = {
            "model": cfg.model or "",
            "query": query,
            "documents": [c.content for c in chunks],
            "top_n": len(chunks),
            "return_documents": False,
        }
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}

        def outcome(
            status: RerankStatus, ordered: Sequence[UnifiedChunk], detail: str = ""
        ) -> RerankOutcome:
            took = int((time.perf_counter() - started) * 1000)
            return RerankOutcome(status, list(ordered), took, detail)

        try:
            async with asyncio.timeout(min(cfg.timeout_s, timeout_s)):
                response = await self._http.post(cfg.url, json=body, headers=headers)
        except TimeoutError:
            return outcome("timeout", chunks, "no answer within the deadline")
        except httpx.HTTPError as exc:
            return outcome("error", chunks, f"request failed: {type(exc).__name__}")
        if response.status_code != 200:
            return outcome("error", chunks, f"HTTP {response.status_code}")
        try:
            results = response.json()["results"]
            scored = {int(r["index"]): _unit(float(r["relevance_score"])) for r in results}
        except (ValueError, KeyError, TypeError):
            return outcome("error", chunks, "an unreadable answer")
        if not scored or not all(0 <= i < len(chunks) for i in scored):
            return outcome("error", chunks, "indexes outside the documents sent")
        # Passages the reranker did not score keep their fused order, after the scored ones.
        ranked = sorted(scored, key=lambda i: scored[i], reverse=True)
        rest = [i for i in range(len(chunks)) if i not in scored]
        reordered = [chunks[i].model_copy(update={"score": scored[i]}) for i in ranked]
        reordered += [chunks[i].model_copy(update={"score": 0.0}) for i in rest]
        return outcome("ok", reordered)
