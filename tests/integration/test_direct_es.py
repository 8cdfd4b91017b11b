"""The retrieval routes answered straight from ASGI (retrieval_svc/direct.py, issue #17): the
same answers as FastAPI's handling of the same routes, and the edge behaviour kept."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from retrieval_svc.app import create_app
from retrieval_svc.direct import DirectRoutes
from retrieval_svc.settings import Settings
from tests.support import app_client, auth, make_settings
from tests.support.corpus import FILTER_KB, SAMPLES_KB

pytestmark = pytest.mark.anyio

ROUTES = ("/retrieval", "/v1/search", "/v1/tools/unified-search")


def reference_app(settings: Settings) -> FastAPI:
    """The app without DirectRoutes: FastAPI answers the retrieval routes as it does every
    other one (the reference for the comparison)."""
    app = create_app(settings)
    before = len(app.user_middleware)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not DirectRoutes]
    assert len(app.user_middleware) == before - 1
    return app


@pytest.fixture
async def pair(corpus: str) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    settings = make_settings(corpus)
    async with app_client(settings) as direct, app_client(reference_app(settings)) as ref:
        yield direct, ref


def timeless(body: Any) -> Any:
    """A response body without its timings (they differ from one request to the next)."""
    if isinstance(body, dict):
        return {k: timeless(v) for k, v in body.items() if k not in ("took_ms", "es_took_ms")}
    if isinstance(body, list):
        return [timeless(v) for v in body]
    return body


DIFY = {"knowledge_id": SAMPLES_KB, "query": "消防 巡检", "retrieval_setting": {"top_k": 4}}
CASES: list[tuple[str, dict[str, Any] | bytes, str]] = [
    # answers
    ("/retrieval", DIFY, "anon"),
    (
        "/retrieval",
        {
            **DIFY,
            "knowledge_id": FILTER_KB,
            "query": "通用",
            "metadata_condition": {
                "logical_operator": "or",
                "conditions": [
                    {"name": "category", "comparison_operator": "is", "value": "制度"},
                    {"name": "year", "comparison_operator": ">", "value": 2024},
                ],
            },
        },
        "anon",
    ),
    ("/v1/search", {"query": "消防 巡检", "knowledge_ids": [SAMPLES_KB], "top_k": 3}, "ops"),
    (
        "/v1/search",
        {
            "query": "通用",
            "knowledge_ids": [FILTER_KB],
            "filter": {"or": [{"field": "category", "op": "eq", "value": "巡检"}]},
            "principal": {"user_id": "u1", "roles": ["物业经理"]},
        },
        "anon",
    ),
    ("/v1/tools/unified-search", {"query": "消防", "knowledge_ids": SAMPLES_KB}, "anon"),
    # refusals: validation (field level), filter, permission, key, unknown knowledge base
    ("/v1/search", {"query": "", "knowledge_ids": [SAMPLES_KB]}, "anon"),
    ("/v1/search", {"query": "x", "knowledge_ids": [SAMPLES_KB], "top_k": "many"}, "anon"),
    ("/v1/search", {"query": "x", "knowledge_ids": [SAMPLES_KB], "extra": 1}, "anon"),
    ("/retrieval", {"knowledge_id": SAMPLES_KB, "query": "x"}, "anon"),
    (
        "/v1/search",
        {"query": "x", "knowledge_ids": [FILTER_KB], "filter": {"field": "nope", "op": "eq"}},
        "anon",
    ),
    ("/v1/search", {"query": "x", "knowledge_ids": ["secret-kb"]}, "scoped"),
    ("/v1/search", {"query": "x", "knowledge_ids": [SAMPLES_KB]}, "unknown-key"),
    ("/retrieval", {**DIFY, "knowledge_id": "no-such-kb"}, "anon"),
    ("/v1/tools/unified-search", {"query": "x"}, "anon"),
    ("/v1/search", b"", "anon"),
]


@pytest.mark.parametrize(("route", "body", "who"), CASES)
async def test_direct_answers_are_fastapis(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
    route: str,
    body: dict[str, Any] | bytes,
    who: str,
) -> None:
    headers = (
        {**auth(who), "Content-Type": "application/json"}
        if who != "unknown-key"
        else {
            "Authorization": "Bearer not-a-key",
            "Content-Type": "application/json",
        }
    )
    sent = {"content": body} if isinstance(body, bytes) else {"json": body}
    answers = [await c.post(route, headers=headers, **sent) for c in pair]  # type: ignore[arg-type]
    direct, ref = answers
    assert direct.status_code == ref.status_code, (direct.text, ref.text)
    assert timeless(direct.json()) == timeless(ref.json())
    for a in answers:
        assert a.headers["content-type"] == "application/json"
        assert a.headers["cache-control"] == "no-store"
        assert a.headers["x-request-id"]
    if route != "/v1/search" or direct.status_code != 200:
        return
    assert direct.json()["chunk_count"] > 0  # the comparison is of something


async def test_bad_json_is_a_400_that_says_where(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    direct, _ = pair
    for route in ROUTES:
        resp = await direct.post(
            route,
            content=b'{"query": "x", "knowledge_ids": [',
            headers={**auth("anon"), "Content-Type": "application/json"},
        )
        assert resp.status_code == 400
        assert resp.json()["error_code"] == 3001
        assert resp.json()["path"] == "body"
        assert resp.json()["error_msg"].startswith("body: not valid JSON (")
        assert "line 1 column 33" in resp.json()["error_msg"]  # where the body ended


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_only_json_bodies_are_read(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient], content_type: str | None
) -> None:
    """As FastAPI's strict content type: no JSON read from a form or text/plain (a page
    elsewhere can send those without a CORS preflight)."""
    direct, ref = pair
    headers = {**auth("anon"), **({"Content-Type": content_type} if content_type else {})}
    body = b'{"query": "x", "knowledge_ids": ["%s"]}' % SAMPLES_KB.encode()
    for route in ROUTES:
        resp = await direct.post(route, content=body, headers=headers)
        assert resp.status_code == 400, resp.text
        assert "Content-Type: application/json" in resp.json()["error_msg"]
        assert (await ref.post(route, content=body, headers=headers)).status_code == 400
    suffixed = {**auth("anon"), "Content-Type": "application/vnd.dify+json; charset=utf-8"}
    assert (await direct.post("/v1/search", content=body, headers=suffixed)).status_code == 200


async def test_the_key_is_checked_before_the_body(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    for client in pair:
        resp = await client.post("/v1/search", content=b"not json", headers={})
        assert resp.status_code == 403
        assert resp.json()["error_code"] == 1001


async def test_other_methods_and_routes_go_on_to_fastapi(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    direct, _ = pair
    resp = await direct.get("/v1/search", headers=auth("anon"))
    assert resp.status_code == 405
    assert resp.json()["error_code"] == 405
    merged = await direct.post("/v1/merge", json={"rag_chunks": []}, headers=auth("anon"))
    assert merged.status_code == 200
    doubled = direct.base_url.copy_with(path="//retrieval")  # collapsed before DirectRoutes
    assert (await direct.post(doubled, json=DIFY, headers=auth("anon"))).status_code == 200


async def test_metrics_and_the_access_log_name_the_route(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    direct, _ = pair
    registry = direct._transport.app.state.rsvc.metrics.registry  # type: ignore[attr-defined]

    def served(route: str, status: str) -> float:
        labels = {"method": "POST", "route": route, "status": status}
        return registry.get_sample_value("rsvc_http_requests_total", labels) or 0.0

    before = served("/retrieval", "200"), served("/v1/search", "400")
    with caplog.at_level(logging.INFO, logger="rsvc.access"):
        assert (await direct.post("/retrieval", json=DIFY, headers=auth("anon"))).is_success
        bad = await direct.post("/v1/search", json={"query": ""}, headers=auth("anon"))
    assert bad.status_code == 400
    assert (served("/retrieval", "200"), served("/v1/search", "400")) == (
        before[0] + 1,
        before[1] + 1,
    )
    lines = [r.fields for r in caplog.records if r.name == "rsvc.access"]  # type: ignore[attr-defined]
    assert [(x["route"], x["status"]) for x in lines] == [("/retrieval", 200), ("/v1/search", 400)]
    assert lines[0]["key"] == "anon" and lines[0]["rag_chunks"] > 0


async def test_an_unexpected_error_is_a_logged_5000(
    pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from retrieval_svc.search.engine import SearchEngine

    async def boom(*_: object, **__: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(SearchEngine, "search", boom)
    for client in pair:
        app = client._transport.app  # type: ignore[attr-defined]
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # as a server does
        with caplog.at_level(logging.ERROR):
            async with httpx.AsyncClient(transport=transport, base_url="http://svc") as raw:
                resp = await raw.post("/retrieval", json=DIFY, headers=auth("anon"))
        assert resp.status_code == 500
        assert resp.json() == {"error_code": 5000, "error_msg": "internal error"}
        assert "secret internals" not in resp.text
        assert any("RuntimeError" in r.getMessage() for r in caplog.records)
        caplog.clear()
