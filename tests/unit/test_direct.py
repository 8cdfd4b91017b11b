"""What DirectRoutes accepts to serve, which bodies it reads as JSON, and how it writes its
answers (direct.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import Depends, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, computed_field, field_serializer

from retrieval_svc.direct import DirectRoute, is_json, parse_body, plain_fields, render
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.schemas import SearchMeta, SearchResponse, WebMeta


class Body(BaseModel):
    query: str


class Out(BaseModel):
    n: int


async def good(body: Body, key: Any, state: Any) -> Out:
    return Out(n=len(body.query))


async def extra(body: Body, key: Any, state: Any, request: Request) -> Out:
    return Out(n=0)


async def untyped(body: dict[str, Any], key: Any, state: Any) -> Out:
    return Out(n=0)


async def nothing() -> None:
    return None


def route(endpoint: Any, **kwargs: Any) -> APIRoute:
    return APIRoute("/x", endpoint, methods=["POST"], **{"response_model": Out, **kwargs})


def test_the_retrieval_shape_is_accepted() -> None:
    direct = DirectRoute.of(route(good))
    assert (direct.body, direct.response, direct.endpoint) == (Body, Out, good)


@pytest.mark.parametrize(
    ("built", "why"),
    [
        (lambda: route(extra), "f(body, key, state)"),
        (lambda: route(good, dependencies=[Depends(nothing)]), "extra dependencies"),
        (lambda: route(untyped), "pydantic body model"),
        (lambda: route(good, response_model=None), "pydantic response model"),
    ],
)
def test_anything_fastapi_would_do_more_for_is_refused(built: Any, why: str) -> None:
    with pytest.raises(TypeError, match=why.replace("(", r"\(").replace(")", r"\)")):
        DirectRoute.of(built())


@pytest.mark.parametrize(
    ("content_type", "read"),
    [
        (b"application/json", True),
        (b"Application/JSON; charset=utf-8", True),
        (b"application/vnd.dify+json", True),
        (None, False),
        (b"", False),
        (b"text/plain", False),
        (b"text/json", False),
        (b"application/x-www-form-urlencoded", False),
        (b"multipart/form-data; boundary=x", False),
        (b"application/jsonp", False),
    ],
)
def test_json_content_types(content_type: bytes | None, read: bool) -> None:
    assert is_json(content_type) is read


@pytest.mark.parametrize(
    ("raw", "content_type", "message"),
    [
        (b"", b"application/json", "body: request body is required"),
        (b'{"query": "x"}', b"text/plain", "Content-Type: application/json"),
        (b'{"query": ', b"application/json", "body: not valid JSON (EOF while parsing"),
        (b'{"query": 5}', b"application/json", "query: Input should be a valid string"),
        (b"[]", b"application/json", "body: Input should be an object"),
    ],
)
def test_bad_bodies_say_what_and_where(raw: bytes, content_type: bytes, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(")) as caught:
        parse_body(Body, content_type, raw)
    assert caught.value.path in ("body", "query")


def test_a_good_body_is_the_model() -> None:
    assert parse_body(Body, b"application/json", '{"query": "巡检"}'.encode()) == Body(query="巡检")


def search_response(metadata: dict[str, Any]) -> SearchResponse:
    chunk = {
        "id": "1",
        "content": '巡检制度 "引号" \\ 与换行\n',
        "source_type": "rag",
        "score": 0.123456789,
        "segment_position": 3,
        "chunk_id": "c-1",
        "metadata": metadata,
    }
    meta = SearchMeta(
        took_ms=3,
        es_took_ms=2,
        mode="bm25",
        rerank="disabled",
        web=WebMeta(status="disabled", provider=None, took_ms=0, detail=""),
    )
    return SearchResponse.model_construct(
        formatted_chunks="[C:1]\n巡检", chunk_count=1, chunk_metadata=[chunk], meta=meta
    )


@pytest.mark.parametrize(
    "metadata",
    [
        {"year": 2024, "tags": ["甲", "乙"], "nested": {"a": [1, 2.5, None, True]}},
        {"big": 1 << 70},  # past orjson's integers
        {"when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)},  # orjson writes +00:00
        {7: "a non-text key"},
    ],
)
def test_render_is_pydantics_json(metadata: dict[str, Any]) -> None:
    """The fast rendering writes what ``model_dump_json`` writes, or leaves it to pydantic."""
    model = search_response(metadata)
    assert plain_fields(SearchResponse)
    assert render(model, plain=True) == model.model_dump_json(by_alias=True).encode()


class Aliased(BaseModel):
    kind: str = Field(serialization_alias="type")


class Computed(BaseModel):
    n: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def twice(self) -> int:
        return 2 * self.n


class Serialized(BaseModel):
    n: int

    @field_serializer("n")
    def as_text(self, n: int) -> str:
        return str(n)


class Base(BaseModel):
    n: int


class Derived(Base):
    secret: str = "not in Base's JSON"


class Holder(BaseModel):
    item: Base  # pydantic writes a Derived here as a Base; its __dict__ has more


class HoldsAliased(BaseModel):
    items: list[Aliased | None]


@pytest.mark.parametrize("model", [Aliased, Computed, Serialized, Holder, HoldsAliased])
def test_a_model_that_renders_itself_is_left_to_pydantic(model: type[BaseModel]) -> None:
    assert not plain_fields(model)


def test_a_subclass_in_a_declared_field_is_written_as_declared() -> None:
    holder = Holder(item=Derived(n=1))
    assert render(holder, plain=plain_fields(Holder)) == holder.model_dump_json().encode()
    assert b"secret" not in render(holder, plain=plain_fields(Holder))
