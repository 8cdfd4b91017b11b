"""The embedder interface, its errors, and the query-embedding cache."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from cachetools import LRUCache

Vector = list[float]


class EmbeddingError(Exception):
    """The embedder could not embed (model server down, bad answer, timeout)."""


class ModelMismatch(Exception):
    """The index holds vectors of another model (or none): searching would mix spaces."""


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """What produced a vector space: recorded in the index ``_meta`` and compared on start."""

    model: str
    dims: int

    def as_meta(self) -> dict[str, object]:
        """The form stored in the index mapping's ``_meta.embedding``."""
        return {"model": self.model, "dims": self.dims}


class Embedder(ABC):
    """Turns passages and queries into vectors of one model."""

    @abstractmethod
    async def describe(self) -> EmbeddingModel:
        """The model's id and dimensions (may ask the model server once)."""

    @abstractmethod
    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for search queries (e5 models: the ``query:`` side)."""

    @abstractmethod
    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for indexed passages (e5 models: the ``passage:`` side)."""

    async def aclose(self) -> None:  # noqa: B027  (optional hook, nothing to do by default)
        """Release what the embedder holds."""


class QueryCache:
    """A bounded LRU of query vectors: a repeated question costs no model call."""

    def __init__(self, embedder: Embedder, size: int) -> None:
        self._embedder = embedder
        self._cache: LRUCache[str, Vector] = LRUCache(maxsize=max(1, size))

    async def vector(self, text: str) -> Vector:
        """The vector for ``text``, from the cache when it was asked before."""
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        (vector,) = await self._embedder.embed_queries([text])
        self._cache[text] = vector
        return vector
