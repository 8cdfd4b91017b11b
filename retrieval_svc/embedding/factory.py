"""Building the configured embedder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

from retrieval_svc.embedding.base import Embedder
from retrieval_svc.embedding.local import LocalEmbedder
from retrieval_svc.embedding.openai import OpenAIConfig, OpenAIEmbedder
from retrieval_svc.settings import IndexSettings

EmbedderKind = Literal["local", "openai", "none"]


@dataclass(frozen=True, slots=True)
class EmbedderConfig:
    """Which embedder, and for ``openai`` how to reach it."""

    kind: EmbedderKind = "local"
    batch_size: int = 16
    openai: OpenAIConfig | None = None


def make_embedder(config: EmbedderConfig, http: httpx.AsyncClient | None) -> Embedder | None:
    """The embedder ``config`` names (None for ``none``)."""
    if config.kind == "none":
        return None
    if config.kind == "local":
        return LocalEmbedder(batch_size=config.batch_size)
    if config.openai is None or http is None:
        raise ValueError("the openai embedder needs RSVC_EMBEDDING_URL and RSVC_EMBEDDING_MODEL")
    return OpenAIEmbedder(http, config.openai)


def embedder_config(settings: IndexSettings) -> EmbedderConfig:
    """The embedder configuration in ``settings``."""
    openai = None
    if settings.embedder == "openai":
        assert settings.embedding_url and settings.embedding_model  # checked by the settings
        key = settings.embedding_api_key
        openai = OpenAIConfig(
            base_url=settings.embedding_url,
            model=settings.embedding_model,
            api_key=key.get_secret_value() if key else None,
            dimensions=settings.embedding_dimensions,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_s,
            in_flight=settings.embedding_in_flight,
            retries=settings.embedding_retries,
            send_input_type=settings.embedding_input_type,
            query_prefix=settings.embedding_query_prefix,
            passage_prefix=settings.embedding_passage_prefix,
        )
    return EmbedderConfig(
        kind=settings.embedder, batch_size=settings.embedding_batch_size, openai=openai
    )
