"""No input is a 500 (issue #24 item 6): numeric and calendar extremes — ±inf, nan, 10**400,
2**63 ± 1, years 1 and 9999, offsets ±23:59 — through every filter and condition path, on the
app with the real cluster, are answered 200 or 400 with a path; and a 500 that still happens
(a bug) leaves the keep-alive connection open."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_svc.app import create_app
from tests.support import DIFY_DESIGN_OPERATORS, app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import FILTER_KB
from tests.support.fake_provider import ServerThread

BIG = 10**400
# Written as JSON text: json.dumps writes inf and nan as Infinity and NaN, as a hostile
# caller may; a 400-digit integer is a valid JSON number.
EXTREMES: list[Any] = [
    float("inf"),
    float("-inf"),
    float("nan"),
    BIG,
    -BIG,
    2**63 - 1,
    2**63,
    2**63 + 1,
    -(2**63),
    -(2**63) - 1,
    2**31,
    1e308,
    1e20,
    1e18,
    -1e18,
    "1e400",
    "1e20",
    "Infinity",
    "-inf",
    "NaN",
    str(BIG),
    "0001-01-01",
    "9999-12-31",
    "0001-01-01T00:00:00+23:59",
    "0001-01-01T00:00:00-23:59",
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T23:59:59+23:59",
    "2026-02-30",
    "",
]
VALUES = (
    st.sampled_from(EXTREMES)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.datetimes().map(lambda d: d.isoformat())
)
FIELDS = ["category", "year", "effective", "draft", "segment_position", "content", "tags", "nope"]
NATIVE_OPS = [
    "eq", "ne", "in", "nin", "any", "all", "none", "contains", "not_contains", "prefix",
    "suffix", "gt", "gte", "lt", "lte", "between", "before", "after",
]  # fmt: skip
LIST_OPS = {"in", "nin", "any", "all", "none", "between"}


@pytest.fixture
async def client(corpus: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(corpus)) as c:
        yield c
        assert postcheck_drops(c) == 0


async def post(client: httpx.AsyncClient, route: str, body: Any, key: str = "anon") -> Any:
    return await client.post(
        route,
        content=json.dumps(body),  # (Infinity and NaN as a hostile caller writes them)
        headers={**auth(key), "Content-Type": "application/json"},
    )


def assert_answered(resp: httpx.Response, where: str) -> None:
    assert resp.status_code in (200, 400, 404), (where, resp.status_code, resp.text[:300])
    if resp.status_code == 400:
        error = resp.json()
        assert error["error_code"] == 3001 and error.get("path"), (where, error)


def native(field: str, op: str, value: Any) -> dict[str, Any]:
    if op in LIST_OPS:
        value = [value, value] if op == "between" else [value]
    condition = {"field": field, "op": op, "value": value}
    return {"query": "通用", "knowledge_ids": [FILTER_KB], "filter": condition}


def dify(name: str, op: str, value: Any) -> dict[str, Any]:
    return {
        "knowledge_id": FILTER_KB,
        "query": "通用",
        "retrieval_setting": {"top_k": 3, "score_threshold": 0},
        "metadata_condition": {
            "conditions": [{"name": name, "comparison_operator": op, "value": value}]
        },
    }


# The reproductions of the issue, each a 500 (or a 503) before.
REPORTED = [
    ("/v1/search", native("effective", "before", 1e20)),
    ("/v1/search", native("effective", "after", "1e20")),
    ("/v1/search", native("effective", "gt", 1e18)),
    ("/v1/search", native("effective", "eq", float("inf"))),
    ("/v1/search", native("effective", "gte", "9999-12-31T23:59:59-23:59")),
    ("/v1/search", native("segment_position", "eq", "1e400")),
    ("/v1/search", native("segment_position", "eq", BIG)),
    ("/retrieval", dify("category", "is", BIG)),
    ("/retrieval", dify("year", "is", BIG)),
    ("/retrieval", dify("nope", ">", BIG)),
    ("/retrieval", dify("year", ">", BIG)),
    ("/retrieval", dify("version", "is", float("inf"))),
    ("/retrieval", dify("effective", "is", 1e20)),
    ("/retrieval", dify("effective", "before", 1e18)),
    ("/retrieval", dify("effective", "is", "9999-12-31")),
    (
        "/v1/tools/unified-search",
        {
            "query": "通用",
            "knowledge_ids": FILTER_KB,
            "filter": json.dumps({"field": "effective", "op": "before", "value": 1e20}),
        },
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("route", "body"), REPORTED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REPORTED)]
)
async def test_reported_extremes_are_400s_with_a_path(
    client: httpx.AsyncClient, route: str, body: Any
) -> None:
    resp = await post(client, route, body, key="anon")
    assert_answered(resp, route)


@pytest.mark.anyio
@pytest.mark.parametrize("position", ["inf", "nan", "-inf", "1e400", str(BIG), 1e300])
async def test_merge_takes_any_position(client: httpx.AsyncClient, position: Any) -> None:
    body = {"rag_chunks": [{"content": "巡更", "metadata": {"segment_position": position}}]}
    resp = await post(client, "/v1/merge", body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["chunk_metadata"][0]["segment_position"] == 0


@pytest.mark.anyio
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), op=st.sampled_from(NATIVE_OPS), value=VALUES)
async def test_native_filters_with_extremes(
    client: httpx.AsyncClient, field: str, op: str, value: Any
) -> None:
    body = native(field, op, value)
    assert_answered(await post(client, "/v1/search", body), f"native {field} {op} {value!r}")
    tool = {"query": "通用", "knowledge_ids": FILTER_KB, "filter": json.dumps(body["filter"])}
    assert_answered(await post(client, "/v1/tools/unified-search", tool), "tool")


@pytest.mark.anyio
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from([*FIELDS, "version"]),
    op=st.sampled_from(DIFY_DESIGN_OPERATORS),
    value=VALUES | st.lists(VALUES, max_size=3),
)
async def test_dify_conditions_with_extremes(
    client: httpx.AsyncClient, name: str, op: str, value: Any
) -> None:
    assert_answered(await post(client, "/retrieval", dify(name, op, value)), f"{name} {op}")


def test_a_500_keeps_the_connection_open(corpus: str) -> None:
    app = create_app(make_settings(corpus))

    @app.get("/boom")
    async def boom() -> None:  # a bug, as far as the service can tell
        raise RuntimeError("a bug")

    with (
        ServerThread(app, lifespan="on") as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn,
    ):
        reader = conn.makefile("rb")

        def ask(path: str) -> tuple[int, bytes]:
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            status = int(reader.readline().split()[1])
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            return status, reader.read(length)

        status, body = ask("/boom")
        assert status == 500 and json.loads(body) == {
            "error_code": 5000,
            "error_msg": "internal error",
        }
        assert ask("/healthz") == (200, b'{"status":"ok"}')  # the same connection
