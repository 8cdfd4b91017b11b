"""Any OpenAI-compatible ``/v1/embeddings`` endpoint (Xinference, TEI, vLLM, Ollama, DashScope's
compatible mode, OpenAI itself): how a deployment plugs in its own model server.

Passages (the indexer's side) go as several batches in flight, so a GPU server is never idle
between one answer and the next call, and a call the server refuses for load (429, 502, 503,
504) or that fails on the way is tried again after a back-off (the server's ``Retry-After``
when it sends one). Queries are asked once: a search has a deadline, and hybrid search falls
back to BM25 sooner than a retry would answer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from retrieval_svc.causes import cause
from retrieval_svc.embedding.base import Embedder, EmbeddingError, EmbeddingModel, Vector


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where the endpoint is and how to call it."""

    base_url: str  # up to and including /v1, e.g. http://xinference:9997/v1
    model: str
    api_key: str | None = None
    dimensions: int | None = None  # sent as ``dimensions`` when set (models that truncate)
    batch_size: int = 32
    timeout_s: float = 30.0
    in_flight: int = 4  # passage batches sent at once
    retries: int = 5  # further tries of a passage batch refused for load or lost on the way
    backoff_s: float = 0.5  # the first wait; doubled on every try (with jitter), at most 30 s
    # Servers that embed queries and passages differently (e5, bge with instructions) take an
    # ``input_type`` of ``query``/``passage``; OpenAI itself refuses unknown fields, so it is
    # sent only when enabled.
    send_input_type: bool = False
    query_prefix: str = ""
    passage_prefix: str = ""


RETRY_STATUS = frozenset({429, 502, 503, 504})
MAX_WAIT_S = 30.0


class _Retryable(EmbeddingError):
    """A failure that another try may not meet (load, a lost connection), with the server's
    ``Retry-After`` when it sent one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds of a ``Retry-After`` header (its date form is not followed)."""
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


class OpenAIEmbedder(Embedder):
    """Batches texts to ``POST {base_url}/embeddings``; the answer's ``index`` orders them."""

    def __init__(self, http: httpx.AsyncClient, config: OpenAIConfig) -> None:
        self._http = http
        self._config = config
        self._dims: int | None = config.dimensions
        self.retried = 0  # calls tried again (read by tests and benchmarks)

    async def _call_with_retries(self, texts: Sequence[str], input_type: str) -> list[Vector]:
        """``_call``, tried again on load or a lost connection up to ``retries`` times."""
        cfg = self._config
        for attempt in range(cfg.retries + 1):
            try:
                return await self._call(texts, input_type)
            except _Retryable as exc:
                if attempt == cfg.retries:
                    raise EmbeddingError(f"{exc} (after {attempt + 1} tries)") from exc
                wait = exc.retry_after_s
                if wait is None:
                    wait = cfg.backoff_s * 2**attempt * random.uniform(0.5, 1.0)
                self.retried += 1
                await asyncio.sleep(min(wait, MAX_WAIT_S))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, texts: Sequence[str], input_type: str) -> list[Vector]:
        cfg = self._config
        body: dict[str, Any] = {
            "model": cfg.model,
            "input": list(texts),
            "encoding_format": "float",
        }
        if cfg.dimensions:
            body["dimensions"] = cfg.dimensions
        if cfg.send_input_type:
            body["input_type"] = input_type
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        url = cfg.base_url.rstrip("/") + "/embeddings"
        try:
            response = await self._http.post(url, json=body, headers=headers, timeout=cfg.timeout_s)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"embedding server {url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            why = cause(exc) or type(exc).__name__
            raise _Retryable(f"embedding server {url} unreachable: {why}") from exc
        if response.status_code in RETRY_STATUS:
            raise _Retryable(
                f"embedding server {url} answered HTTP {response.status_code}",
                _retry_after(response),
            )
        if response.status_code != 200:
            raise EmbeddingError(f"embedding server {url} answered HTTP {response.status_code}")
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embedding server {url} sent an unreadable answer") from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1:
            raise EmbeddingError(
                f"embedding server {url} sent {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors

    async def _embed(self, texts: Sequence[str], prefix: str, input_type: str) -> list[Vector]:
        size = self._config.batch_size
        batches = [[prefix + t for t in texts[i : i + size]] for i in range(0, len(texts), size)]
        if input_type == "query":  # once, in order: a search's deadline is near
            answers = [await self._call(batch, input_type) for batch in batches]
        else:
            gate = asyncio.Semaphore(self._config.in_flight)

            async def one(batch: list[str]) -> list[Vector]:
                async with gate:
                    return await self._call_with_retries(batch, input_type)

            answers = list(await asyncio.gather(*(one(b) for b in batches)))
        out = [vector for answer in answers for vector in answer]
        if out:
            self._dims = len(out[0])
        return out

    async def describe(self) -> EmbeddingModel:
        """The configured model; its dimensions from configuration or one probe call."""
        if self._dims is None:
            await self.embed_queries(["dimension probe"])
        assert self._dims is not None
        return EmbeddingModel(model=f"openai/{self._config.model}", dims=self._dims)

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Query vectors."""
        return await self._embed(texts, self._config.query_prefix, "query")

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        """Passage vectors."""
        return await self._embed(texts, self._config.passage_prefix, "passage")
