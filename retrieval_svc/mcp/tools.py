"""The MCP tools: ``search``, ``list_knowledge_bases`` and ``read_document``.

A transport like ``routes/``: each tool translates its arguments into the one pipeline's
shapes (``retrieval.answer``, the one access decision ``access.kb_access``) and renders the
result; nothing of retrieval or access is decided here. Descriptions are written for a model,
in English and Chinese, since the sample corpus is Chinese.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from retrieval_svc.access import kb_access
from retrieval_svc.acl import chunk_visible
from retrieval_svc.acl.values import MAX_ID_LENGTH
from retrieval_svc.auth.identity import Claims, principal_for
from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.chunks import chunk_from_source, number_chunks
from retrieval_svc.errors import KnowledgeBaseNotFound, ServiceError
from retrieval_svc.merge import chunk_dict, format_chunks, numbered_output
from retrieval_svc.refusals import note_refusal
from retrieval_svc.retrieval import RetrievalQuery, WebRequest, answer, audit_event, cut_query
from retrieval_svc.schemas import (
    MAX_KNOWLEDGE_IDS,
    RetrievalMode,
    ToolOutput,
    ToolRequest,
    tool_filter,
    tool_knowledge_ids,
)
from retrieval_svc.state import AppState

PATH = "/mcp"  # the transport's path: the route label of its metrics and refusals
_TOOL = ToolRequest.model_fields


def _described(name: str) -> str:
    return _TOOL[name].description or ""


class KnowledgeBase(BaseModel):
    """A knowledge base the caller may read, with what it can see in it."""

    knowledge_id: str
    name: str
    documents: int = Field(description="Documents with a chunk visible to the caller.")
    chunks: int = Field(description="Chunks visible to the caller.")


class KnowledgeBases(BaseModel):
    """``list_knowledge_bases``: the knowledge bases, and the embedding model of the index."""

    knowledge_bases: list[KnowledgeBase]
    embedding_model: str | None


class DocumentText(BaseModel):
    """``read_document``: a document's visible chunks, in order."""

    document_id: str
    document_title: str
    chunks: list[dict[str, Any]]


def caller(ctx: Context) -> tuple[AppState, ApiKeyConfig, Claims]:
    """The service state, the key the request acts with and the end user's claims (the OIDC
    user's own token, or the application's identity headers: ``mcp.identity``); put on the
    request by ``McpRoutes`` once the request was authenticated. No tool argument is identity:
    the model fills the arguments."""
    scope = ctx.request_context.request.scope  # type: ignore[union-attr]
    found: tuple[AppState, ApiKeyConfig, Claims] = scope["rsvc.mcp"]
    return found


def _error(exc: ServiceError) -> CallToolResult:
    """A failed call as the model reads it: the same words as the HTTP error."""
    return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)


def _refused(
    state: AppState, key: ApiKeyConfig, exc: ServiceError, knowledge_ids: str = ""
) -> CallToolResult:
    """A refused call (a 4xx over HTTP), counted and kept as the HTTP routes' refusals are
    (``refusals``), as the model reads it."""
    note_refusal(state.metrics, state.refusals, PATH, key, exc, knowledge_id=knowledge_ids)
    return _error(exc)


def register(mcp: MCPServer) -> None:
    """Add the tools to ``mcp``."""

    @mcp.tool(
        description=(
            "Search the organisation's knowledge bases (and optionally the web) for passages "
            "that answer a question, as the current user is allowed to see them. Returns the "
            "passages numbered [C:1], [C:2], … for citing; cite only what you use. Use it "
            "for any question about the organisation's documents, rules or procedures. "
            "检索企业知识库（可选联网），按当前用户的权限返回编号段落 [C:N]，"
            "回答时只引用用到的段落。"
        ),
        structured_output=True,
    )
    async def search(
        query: Annotated[str, Field(min_length=1, description=_described("query"))],
        knowledge_ids: Annotated[
            list[str] | str,
            Field(
                description="Knowledge base ids to search (list_knowledge_bases names them): a "
                f"list, or comma-separated text; 1 to {MAX_KNOWLEDGE_IDS}."
            ),
        ],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=100, description=_described("top_k"))] = 5,
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description="Optional filter tree on metadata: {and|or: [...]}, {not: …} "
                "or {field, op, value}."
            ),
        ] = None,
        mode: Annotated[RetrievalMode | None, Field(description=_described("mode"))] = None,
        web: Annotated[bool, Field(description=_described("web"))] = False,
    ) -> Annotated[CallToolResult, ToolOutput]:
        state, key, who = caller(ctx)
        named = knowledge_ids if isinstance(knowledge_ids, str) else ", ".join(knowledge_ids[:5])
        try:
            done = await answer(
                state,
                key,
                RetrievalQuery(
                    query=cut_query(query, state.settings.max_query_chars),
                    knowledge_ids=tool_knowledge_ids(knowledge_ids),
                    top_k=top_k,
                    filter=tool_filter(filter),
                    claims=who,
                    mode=mode,
                ),
                WebRequest(max_results=state.settings.web_max_results) if web else None,
            )
        except ServiceError as exc:
            return _refused(state, key, exc, named)
        output = numbered_output(done.chunks)
        text = output["formatted_chunks"] or "No passage visible to this user matches."
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=output
        )  # fmt: skip

    @mcp.tool(
        description=(
            "List the knowledge bases the current user may search, with how many documents "
            "and passages each holds for them. Use it to choose knowledge_ids for search. "
            "列出当前用户可检索的知识库及其可见文档数、段落数。"
        ),
        structured_output=True,
    )
    async def list_knowledge_bases(ctx: Context) -> Annotated[CallToolResult, KnowledgeBases]:
        state, key, who = caller(ctx)
        try:
            principal = await principal_for(key, who, state.acl, state.oidc)
            found = await state.engine.knowledge_bases(principal.tenant, principal.roles)
        except ServiceError as exc:
            return _refused(state, key, exc)
        readable = [
            KnowledgeBase(**kb)
            for kb in found
            if kb_access(state.acl, key, principal, kb["knowledge_id"]).allowed
        ]
        audit_event(state, key, principal, [kb.knowledge_id for kb in readable], "list", [])
        model = state.embedding_model.model if state.embedding_model else None
        listed = KnowledgeBases(knowledge_bases=readable, embedding_model=model)
        text = "\n".join(
            f"{kb.knowledge_id} ({kb.name}): {kb.documents} documents, {kb.chunks} passages"
            for kb in readable
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text or "No knowledge base is readable.")],
            structured_content=listed.model_dump(),
        )

    @mcp.tool(
        description=(
            "Read a whole document by its document_id (from a search result's chunk_metadata), "
            "to follow up a citation or read around a passage. Only documents the current user "
            "may see can be read. 按 document_id 读取整篇文档（仅限当前用户可见的文档）。"
        ),
        structured_output=True,
    )
    async def read_document(
        document_id: Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)],
        ctx: Context,
    ) -> Annotated[CallToolResult, DocumentText]:
        state, key, who = caller(ctx)
        try:
            principal = await principal_for(key, who, state.acl, state.oidc)
            sources = await state.engine.get_chunks(
                tenant=principal.tenant, chunk_id=None, document_id=document_id
            )
            visible = [
                s
                for s in sources
                if chunk_visible(s, principal.roles)
                and s.get("tenant") == principal.tenant
                and kb_access(state.acl, key, principal, str(s.get("knowledge_id", ""))).allowed
            ]
        except ServiceError as exc:
            return _refused(state, key, exc)
        if not visible:  # hidden answers exactly as absent (design.md §4): not a refusal
            return _error(KnowledgeBaseNotFound(f"document {document_id!r} does not exist"))
        chunks = number_chunks([chunk_from_source(s, 1.0) for s in visible])
        kbs = sorted({c.knowledge_id for c in chunks if c.knowledge_id})
        audit_event(state, key, principal, kbs, "read_document", chunks)
        document = DocumentText(
            document_id=document_id,
            document_title=chunks[0].document_title,
            chunks=[chunk_dict(c) for c in chunks],
        )
        return CallToolResult(
            content=[TextContent(type="text", text=format_chunks(chunks))],
            structured_content=document.model_dump(),
        )
