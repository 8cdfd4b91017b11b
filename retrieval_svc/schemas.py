"""Request and response bodies of the native API (design.md §8)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval_svc.acl.values import MAX_ID_LENGTH, ListValueError, parse_list
from retrieval_svc.auth.identity import Claims, make_claims
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import FilterNode, parse_filter

RetrievalMode = Literal["hybrid", "bm25", "vector"]
SET_BY_APP = " Set by the application, never by the model."
MAX_KNOWLEDGE_IDS = 50  # knowledge bases in one request, on every route
KnowledgeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]


class PrincipalClaims(BaseModel):
    """What the caller says about the end user; honoured per the API key's mode."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(None, max_length=256, description="End user id.")
    roles: list[str] | str | None = Field(
        None, description="Roles (trusted keys only): a list, JSON-array text or comma text."
    )
    token: str | None = Field(
        None,
        max_length=8192,
        description="Principal token: signed by your backend (signed keys) or the user's "
        "token from your OpenID Connect provider (oidc keys).",
    )

    def claims(self, path: str = "principal") -> Claims:
        """These claims, parsed (roles as a list, JSON-array text or comma text)."""
        return make_claims(self.user_id, self.roles, self.token, path=path)


class WebOptions(BaseModel):
    """Web search options."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    max_results: int | None = Field(None, ge=1, le=50, description="Default: RSVC_WEB_MAX_RESULTS.")
    freshness: Literal["day", "week", "month", "year"] | None = None


class SearchRequest(BaseModel):
    """``POST /v1/search``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        description="The question. Longer than RSVC_MAX_QUERY_CHARS (1000): the first that many "
        "characters are searched (as on every route; the cut is logged).",
    )
    knowledge_ids: list[KnowledgeId] = Field(min_length=1, max_length=MAX_KNOWLEDGE_IDS)
    top_k: int = Field(5, ge=1)
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)
    filter: dict[str, Any] | None = Field(
        None,
        description="Filter tree: {and: [...]}, {or: [...]}, {not: {...}} or "
        "{field, op, value}; see design.md §5.",
    )
    principal: PrincipalClaims | None = None
    web: WebOptions | None = None
    mode: RetrievalMode | None = Field(
        None,
        description="hybrid (BM25 + vectors, fused), bm25 or vector; default from configuration.",
    )


class WebMeta(BaseModel):
    """What web search did."""

    status: Literal["ok", "disabled", "timeout", "error"] = "disabled"
    provider: str | None = None
    took_ms: int = 0
    detail: str = Field("", description="Why, when web was asked for and gave nothing.")


class SearchMeta(BaseModel):
    """Timings and web status."""

    took_ms: int = Field(description="The whole request in the service, in ms.")
    es_took_ms: int = Field(
        description="Elasticsearch's own time for the search, in ms (hybrid: the longer of its "
        "two searches, which run side by side); never more than took_ms."
    )
    mode: RetrievalMode = Field("bm25", description="The retrieval mode that ran.")
    rerank: Literal["ok", "disabled", "timeout", "error"] = Field(
        "disabled", description="What the optional reranker did (anything but ok: fused order)."
    )
    web: WebMeta = Field(default_factory=WebMeta)


class SearchResponse(BaseModel):
    """``POST /v1/search``: the G-Cite context and its chunks."""

    formatted_chunks: str
    chunk_count: int
    chunk_metadata: list[dict[str, Any]]
    meta: SearchMeta


class ToolOutput(BaseModel):
    """The customer's code-node output shape (seed §3.7)."""

    formatted_chunks: str = Field(description="Numbered context for the LLM: [C:1]\\n…")
    chunk_count: int
    chunk_metadata: list[dict[str, Any]] = Field(description="UnifiedChunk objects, by id.")


class ToolWebMeta(BaseModel):
    """What web search did for a tool call."""

    status: Literal["ok", "disabled", "timeout", "error"] = Field(
        description="disabled when web was not asked for, or no provider is configured"
    )
    detail: str = Field("", description="Why, when web was asked for and gave nothing.")


class ToolMeta(BaseModel):
    """How the search ran. meta.web.detail says why no web passages came back when web was
    asked for (for example: no web provider is configured)."""

    mode: RetrievalMode = Field(description="The retrieval mode that ran.")
    web: ToolWebMeta


class ToolSearchOutput(ToolOutput):
    """``POST /v1/tools/unified-search``: the code node's output, plus ``meta``."""

    meta: ToolMeta


class ToolRequest(BaseModel):
    """``POST /v1/tools/unified-search``: flat, string-friendly parameters for a Dify tool."""

    model_config = ConfigDict(extra="ignore")

    # Descriptions are for the LLM that decides how to call the tool (they become the
    # tool's OpenAPI document). A Dify tool parameter is unbounded, so a long query is cut
    # (max_query_chars), never refused.
    query: str = Field(min_length=1, description="The user's question, as a search query.")
    knowledge_ids: str | list[str] = Field(
        description=f"Knowledge base ids, comma-separated (or a JSON array); at most "
        f"{MAX_KNOWLEDGE_IDS}."
    )
    user_id: str | None = Field(None, max_length=256, description="The end user's id." + SET_BY_APP)
    user_roles: str | list[str] | None = Field(
        None,
        description="The end user's roles, comma-separated (trusted keys only)." + SET_BY_APP,
    )
    principal_token: str | None = Field(
        None,
        max_length=8192,
        description="Principal token: signed by your backend, or the user's OIDC token."
        + SET_BY_APP,
    )
    filter: str | dict[str, Any] | None = Field(
        None, description="Optional filter tree as JSON text."
    )
    top_k: int = Field(5, ge=1, description="How many knowledge-base passages.")
    score_threshold: float = Field(
        0.0, ge=0.0, le=1.0, description="Only passages scoring at least this (0 to 1)."
    )
    web: bool = Field(False, description="Also search the web.")
    web_max_results: int | None = Field(
        None, ge=1, le=50, description="How many web passages at most."
    )
    mode: RetrievalMode | None = Field(
        None,
        description="Retrieval mode: hybrid (keywords and meaning), bm25 (keywords only) or "
        "vector (meaning only). Leave empty for the configured default.",
    )


def tool_knowledge_ids(value: str | list[str]) -> list[str]:
    """A tool's knowledge bases: a list, JSON-array text or comma text; 1 to 50 of them."""
    try:
        ids = [str(v) for v in parse_list(value, what="knowledge_ids", max_items=MAX_KNOWLEDGE_IDS)]
    except ListValueError as exc:
        raise InvalidRequest(f"knowledge_ids: {exc}", path="knowledge_ids") from None
    if not ids:
        raise InvalidRequest(
            "knowledge_ids: name at least one knowledge base", path="knowledge_ids"
        )
    for i, kb in enumerate(ids):
        if len(kb) > MAX_ID_LENGTH:
            raise InvalidRequest(
                f"knowledge_ids[{i}]: longer than {MAX_ID_LENGTH} characters",
                path=f"knowledge_ids[{i}]",
            )
    return ids


def tool_filter(value: str | dict[str, Any] | None) -> FilterNode | None:
    """A tool's filter tree: an object, or JSON text of one (empty: none)."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return parse_filter(value)
    try:
        raw = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"filter: not valid JSON ({exc.msg})", path="filter") from None
    except RecursionError:
        raise InvalidRequest("filter: nested too deeply", path="filter") from None
    return parse_filter(raw)


class MergeRequest(BaseModel):
    """``POST /v1/merge``: the inputs of the customer's code node."""

    rag_chunks: Any = Field(None, description="Dify knowledge-retrieval result list.")
    web_chunks: Any = Field(None, description="Web search node output, any supported shape.")
    max_web_results: int | None = Field(None, ge=0, le=100)


class CitationRequest(BaseModel):
    """``POST /v1/citations/resolve``."""

    answer: str = Field(max_length=200_000)
    chunk_metadata: list[dict[str, Any]] = Field(max_length=1000)


class Citation(BaseModel):
    """One cited chunk: its new number, its id in the context, the chunk."""

    number: int
    id: str
    chunk: dict[str, Any]


class CitationResponse(BaseModel):
    """``POST /v1/citations/resolve``: the renumbered answer and what it cites."""

    answer: str
    citations: list[Citation]
    uncited_ids: list[str]
    unknown_ids: list[str]


class ExplainResponse(BaseModel):
    """``POST /v1/explain``: the principal, and each matching chunk's visibility and why."""

    principal: dict[str, Any]
    found: bool
    chunks: list[dict[str, Any]]


class ExplainRequest(BaseModel):
    """``POST /v1/explain``: why a principal can or cannot see a chunk or document."""

    model_config = ConfigDict(extra="forbid")

    principal: PrincipalClaims = Field(default_factory=PrincipalClaims)
    chunk_id: str | None = Field(None, min_length=1, max_length=MAX_ID_LENGTH)
    document_id: str | None = Field(None, min_length=1, max_length=MAX_ID_LENGTH)
