"""The OpenAPI 3.0 document Dify imports as a custom tool (design.md §8).

Dify's importer reads OpenAPI 3.0 (FastAPI writes 3.1), so the document is built here — but
from the same pydantic models the route validates with (``ToolRequest``, ``ToolSearchOutput``,
``UnifiedChunk``), so a parameter or field cannot exist in one and not the other. Their field
descriptions are written for the LLM that decides when and how to call the tool.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Le, MaxLen, MinLen
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from retrieval_svc.chunks import UnifiedChunk
from retrieval_svc.schemas import CitationRequest, ToolRequest, ToolSearchOutput
from retrieval_svc.tool_words import in_chinese

_SCALARS = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _type_schema(annotation: Any) -> dict[str, Any]:
    """An annotation as OpenAPI 3.0: Dify tool parameters are strings, numbers and booleans,
    so a union that admits text (``str | list[str]``) is a string."""
    origin = get_origin(annotation)
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(annotation))}
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        schema = _type_schema(str if str in options else options[0])
        if type(None) in get_args(annotation):
            schema["nullable"] = True
        return schema
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return openapi30(annotation)
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        return {"type": "array", "items": _type_schema(item) if item is not Any else {}}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    return {"type": _SCALARS.get(annotation, "string")}


def openapi30(model: type[BaseModel]) -> dict[str, Any]:
    """``model`` as an OpenAPI 3.0 object schema: types, descriptions, defaults, bounds."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        schema = _type_schema(field.annotation)
        if field.description:
            schema["description"] = field.description
        default = field.default
        if default is PydanticUndefined and field.default_factory is None:
            required.append(name)
        elif default is not None and default is not PydanticUndefined and default != "":
            schema["default"] = default
        for bound in field.metadata:
            if isinstance(bound, Ge):
                schema["minimum"] = bound.ge
            elif isinstance(bound, Le):
                schema["maximum"] = bound.le
            elif isinstance(bound, MinLen):
                schema["minLength"] = bound.min_length
            elif isinstance(bound, MaxLen):
                schema["maxLength"] = bound.max_length
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if model.__doc__:
        out["description"] = " ".join(model.__doc__.split())
    if required:
        out["required"] = required
    return out


def chunk_schema() -> dict[str, Any]:
    """A UnifiedChunk as the tool returns it."""
    return openapi30(UnifiedChunk)


def tool_output_schema() -> dict[str, Any]:
    """The tool's answer: the code node's three fields and ``meta``."""
    schema = openapi30(ToolSearchOutput)
    schema["properties"]["chunk_metadata"]["items"] = chunk_schema()
    return schema


def citation_input_schema() -> dict[str, Any]:
    """``/v1/citations/resolve``'s body."""
    schema = openapi30(CitationRequest)
    schema["properties"]["chunk_metadata"]["items"] = chunk_schema()
    return schema


def tool_input_schema() -> dict[str, Any]:
    """The tool's parameters."""
    return openapi30(ToolRequest)


def tool_openapi(server_url: str, lang: str = "en") -> dict[str, Any]:
    """The tool document, pointing at ``server_url``, its descriptions in ``lang`` (``en``,
    ``zh``: what Dify's tool editor shows, and the LLM reads)."""
    document = _tool_openapi(server_url)
    return in_chinese(document) if lang == "zh" else document


def _tool_openapi(server_url: str) -> dict[str, Any]:
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
                        "content": {"application/json": {"schema": tool_input_schema()}},
                    },
                    "responses": {
                        "200": {
                            "description": "Numbered passages.",
                            "content": {"application/json": {"schema": tool_output_schema()}},
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
                        "content": {"application/json": {"schema": citation_input_schema()}},
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
