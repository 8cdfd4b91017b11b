"""Request and response bodies of the native API (DESIGN §8)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval_svc.chunks import UnifiedChunk


class PrincipalClaims(BaseModel):
    """What the caller says about the end user; honoured per the API key's mode."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(None, max_length=256, description="End user id.")
    roles: list[str] | str | None = Field(
        None, description="Roles (trusted keys only): a list, JSON-array text or comma text."
    )
    token: str | None = Field(
        None, max_length=8192, description="Signed principal token (signed keys only)."
    )


class WebOptions(BaseModel):
    """Web search options."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    max_results: int = Field(5, ge=1, le=50)
    freshness: str | None = None


class SearchRequest(BaseModel):
    """``POST /v1/search``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4096)
    knowledge_ids: list[str] = Field(min_length=1, max_length=50)
    top_k: int = Field(5, ge=1)
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)
    filter: dict[str, Any] | None = Field(
        None,
        description="Filter tree: {and: [...]}, {or: [...]}, {not: {...}} or "
        "{field, op, value}; see DESIGN §5.",
    )
    principal: PrincipalClaims | None = None
    web: WebOptions | None = None


class WebMeta(BaseModel):
    """What web search did."""

    status: Literal["ok", "disabled", "timeout", "error"] = "disabled"
    provider: str | None = None
    took_ms: int = 0


class SearchMeta(BaseModel):
    """Timings and web status."""

    took_ms: int
    es_took_ms: int
    web: WebMeta = Field(default_factory=WebMeta)


class SearchResponse(BaseModel):
    """``POST /v1/search``: the G-Cite context and its chunks."""

    formatted_chunks: str
    chunk_count: int
    chunk_metadata: list[UnifiedChunk]
    meta: SearchMeta


class ExplainRequest(BaseModel):
    """``POST /v1/explain``: why a principal can or cannot see a chunk or document."""

    model_config = ConfigDict(extra="forbid")

    principal: PrincipalClaims = Field(default_factory=PrincipalClaims)
    chunk_id: str | None = Field(None, min_length=1, max_length=256)
    document_id: str | None = Field(None, min_length=1, max_length=256)
