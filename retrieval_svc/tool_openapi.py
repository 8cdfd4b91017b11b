"""The OpenAPI 3.0 document Dify imports as a custom tool (design.md §8).

Written by hand rather than derived from FastAPI's 3.1 schema: Dify's importer reads 3.0,
and the descriptions here are for the LLM that decides when to call the tool.
"""

from __future__ import annotations

from typing import Any

_CHUNK = {
    "type": "object",
    "description": "One numbered chunk (UnifiedChunk).",
    "properties": {
        "id": {"type": "string", "description": "The number N of its [C:N] marker."},
        "content": {"type": "string"},
        "source_type": {"type": "string", "enum": ["rag", "web"]},
        "document_title": {"type": "string"},
        "url": {"type": "string"},
        "score": {"type": "number"},
        "display_subtitle": {"type": "string"},
        "document_name": {"type": "string"},
        "dataset_name": {"type": "string"},
        "site_name": {"type": "string"},
        "site_host": {"type": "string"},
        "source_file_url": {"type": "string"},
        "segment_position": {"type": "integer"},
        "published_date": {"type": "string"},
    },
}


_META = {
    "type": "object",
    "description": "How the search ran. meta.web.detail says why no web passages came back "
    "when web was asked for (for example: no web provider is configured).",
    "properties": {
        "mode": {"type": "string", "enum": ["hybrid", "bm25", "vector"]},
        "web": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["ok", "disabled", "timeout", "error"]},
                "detail": {"type": "string"},
            },
        },
    },
}


def _param(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


_SET_BY_APP = " Set by the application, never by the model."
_TOOL_PARAMS = {
    "query": _param("string", "The user's question, as a search query."),
    "knowledge_ids": _param("string", "Knowledge base ids, comma-separated."),
    "user_id": _param("string", "The end user's id." + _SET_BY_APP),
    "user_roles": _param(
        "string", "The end user's roles, comma-separated (trusted keys only)." + _SET_BY_APP
    ),
    "principal_token": _param("string", "Signed identity token." + _SET_BY_APP),
    "filter": _param("string", "Optional filter tree as JSON text."),
    "top_k": _param("integer", "How many knowledge-base passages.", default=5),
    "web": _param("boolean", "Also search the web.", default=False),
    "web_max_results": _param("integer", "How many web passages at most."),
    "mode": _param(
        "string",
        "Retrieval mode: hybrid (keywords and meaning), bm25 (keywords only) or vector "
        "(meaning only). Leave empty for the configured default.",
        enum=["hybrid", "bm25", "vector"],
    ),
}


def tool_openapi(server_url: str) -> dict[str, Any]:
    """The tool document, pointing at ``server_url``."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "retrieval-svc",
            "version": "1",
            "description": "Searches the company knowledge base (with the user's permissions) "
            "and, optionally, the web; returns numbered passages to cite as [C:N].",
        },
        "servers": [{"url": server_url.rstrip("/")}],
        "paths": {
            "/v1/tools/unified-search": {
                "post": {
                    "operationId": "unified_search",
                    "summary": "Search the knowledge base and the web for passages to cite",
                    "description": "Use this to answer questions about the building, its "
                    "rules, equipment, procedures and services, or general knowledge when web "
                    "is true. Returns formatted_chunks: passages numbered [C:1], [C:2], …; "
                    "cite a passage with its marker only when you use its content.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["query", "knowledge_ids"],
                                    "properties": _TOOL_PARAMS,
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "Numbered passages.",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "properties": {
                                            "formatted_chunks": {"type": "string"},
                                            "chunk_count": {"type": "integer"},
                                            "chunk_metadata": {"type": "array", "items": _CHUNK},
                                            "meta": _META,
                                        },
                                    }
                                }
                            },
                        },
                        "400": {"$ref": "#/components/responses/Error"},
                        "403": {"$ref": "#/components/responses/Error"},
                    },
                }
            },
            "/v1/citations/resolve": {
                "post": {
                    "operationId": "resolve_citations",
                    "summary": "Renumber [C:N] citations in an answer",
                    "description": "Renumbers the [C:N] markers of an answer 1, 2, 3… in order "
                    "of first appearance and lists the cited passages.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["answer", "chunk_metadata"],
                                    "properties": {
                                        "answer": {"type": "string"},
                                        "chunk_metadata": {"type": "array", "items": _CHUNK},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "The renumbered answer and its citations.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "400": {"$ref": "#/components/responses/Error"},
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {
                "Error": {
                    "description": "An error.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "error_code": {"type": "integer"},
                                    "error_msg": {"type": "string"},
                                },
                            }
                        }
                    },
                }
            },
        },
        "security": [{"bearer": []}],
    }
