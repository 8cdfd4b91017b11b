"""What DirectRoutes accepts to serve, and which bodies it reads as JSON (direct.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Depends, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel

from retrieval_svc.direct import DirectRoute, is_json, parse_body
from retrieval_svc.errors import InvalidRequest


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
