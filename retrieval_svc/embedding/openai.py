"""Any OpenAI-compatible ``/v1/embeddings`` endpoint (Xinference, TEI, vLLM, Ollama, DashScope's
compatible mode, OpenAI itself): how a deployment plugs in its own model server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

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
    # Servers that embed queries and passages differently (e5, bge with instructions) take an
    # ``input_type`` of ``query``/``passage``; OpenAI itself refuses unknown fields, so it is
    # sent only when enabled.
    send_input_type: bool = False
    query_prefix: str = ""
    passage_prefix: str = ""


class OpenAIEmbedder(Embedder):
    """Batches texts to ``POST {base_url}/embeddings``; the answer's ``index`` orders them."""

    def __init__(self, http: httpx.AsyncClient, config: OpenAIConfig) -> None:
        self._http = http
        self._config = config
        self._dims: int | None = config.dimensions

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
            raise EmbeddingError(f"embedding server {url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"embedding server {url} unreachable: {type(exc).__name__}"
            ) from exc
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
        out: list[Vector] = []
        size = self._config.batch_size
        for i in range(0, len(texts), size):
            out += await self._call([prefix + t for t in texts[i : i + size]], input_type)
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
