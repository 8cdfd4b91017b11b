"""Embedders: passages (indexer) and queries (service) into vectors (docs/design.md §12).

``local`` runs a small multilingual model in-process (the default: nothing to configure),
``openai`` calls any OpenAI-compatible ``/v1/embeddings`` endpoint, ``none`` turns semantic
search off. Every embedder names its model and dimensions; the index records both, and a
service or indexer configured with another model is refused (``check_index_model``).
"""

from retrieval_svc.embedding.base import (
    Embedder,
    EmbeddingError,
    EmbeddingModel,
    ModelMismatch,
    QueryCache,
)
from retrieval_svc.embedding.factory import EmbedderConfig, embedder_config, make_embedder

__all__ = [
    "Embedder",
    "EmbedderConfig",
    "EmbeddingError",
    "EmbeddingModel",
    "ModelMismatch",
    "QueryCache",
    "embedder_config",
    "make_embedder",
]
