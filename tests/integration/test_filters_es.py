"""Every operator and every Dify operator against the real Elasticsearch (design.md §5, §7)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support import app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import FILTER_KB

pytestmark = pytest.mark.anyio

ALL = {"f1", "f2", "f3", "f4"}


@pytest.fixture
async def client(corpus: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(corpus)) as c:
        yield c
        assert postcheck_drops(c) == 0


async def search_ids(client: httpx.AsyncClient, flt: dict[str, Any] | None) -> set[str]:
    body: dict[str, Any] = {"query": "通用", "knowledge_ids": [FILTER_KB], "top_k": 50}
    if flt is not None:
        body["filter"] = flt
    resp = await client.post("/v1/search", json=body, headers=auth("anon"))
    assert resp.status_code == 200, resp.text
    return {c["chunk_id"] for c in resp.json()["chunk_metadata"]}


def c(field: str, op: str, value: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"field": field, "op": op}
    if value is not None:
        out["value"] = value
    return out


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param(None, ALL, id="no-filter"),
        pytest.param(c("category", "eq", "巡检"), {"f1"}, id="eq"),
        pytest.param(c("category", "ne", "巡检"), {"f2", "f3", "f4"}, id="ne"),
        pytest.param(c("category", "in", ["巡检", "制度"]), {"f1", "f3"}, id="in"),
        pytest.param(c("category", "nin", ["巡检", "制度"]), {"f2", "f4"}, id="nin"),
        pytest.param(c("tags", "eq", "b"), {"f1", "f2"}, id="array-eq-holds"),
        pytest.param(c("tags", "any", ["c", "z"]), {"f2"}, id="array-any"),
        pytest.param(c("tags", "all", ["a", "b"]), {"f1"}, id="array-all"),
        pytest.param(c("tags", "none", ["a"]), {"f2", "f3"}, id="array-none-missing-counts"),
        pytest.param(c("tags", "ne", "a"), {"f2", "f3"}, id="ne-matches-missing"),
        pytest.param(c("category", "contains", "巡"), {"f1", "f4"}, id="contains"),
        pytest.param(c("category", "contains", "*?"), {"f4"}, id="contains-wildcard-literal"),
        pytest.param(c("category", "contains", "*"), {"f4"}, id="star-is-not-a-wildcard"),
        pytest.param(c("category", "not_contains", "巡"), {"f2", "f3"}, id="not-contains"),
        pytest.param(c("category", "prefix", "巡检"), {"f1", "f4"}, id="prefix"),
        pytest.param(c("category", "suffix", "度"), {"f3"}, id="suffix"),
        pytest.param(c("year", "gt", 2024), {"f2", "f4"}, id="gt"),
        pytest.param(c("year", "gte", "2025"), {"f2", "f4"}, id="gte-text-number"),
        pytest.param(c("year", "lt", 2025), {"f1"}, id="lt"),
        pytest.param(c("year", "lte", 2025), {"f1", "f2"}, id="lte"),
        pytest.param(c("year", "between", [2025, 2026]), {"f2", "f4"}, id="between"),
        pytest.param(c("year", "exists"), {"f1", "f2", "f4"}, id="exists"),
        pytest.param(c("year", "missing"), {"f3"}, id="missing"),
        pytest.param(c("effective", "before", "2026-01-01"), {"f2"}, id="before"),
        pytest.param(c("effective", "after", "2026-03-01"), {"f4"}, id="after-exclusive"),
        pytest.param(c("effective", "after", 1767225600), {"f1", "f4"}, id="after-unix-seconds"),
        pytest.param(c("draft", "eq", True), {"f2"}, id="boolean"),
        pytest.param(c("draft", "ne", True), {"f1", "f3", "f4"}, id="boolean-ne"),
        pytest.param(c("segment_position", "in", [1, 3]), {"f1", "f3"}, id="chunk-number-field"),
        pytest.param(c("document_title", "eq", "配电房规程"), {"f2"}, id="title-exact"),
        pytest.param(c("document_title", "contains", "a OR b*"), {"f4"}, id="title-literal"),
        pytest.param(c("content", "contains", "过滤 测试 f3"), {"f3"}, id="content-phrase"),
        pytest.param(c("access_roles", "missing"), ALL, id="acl-missing-all-public"),
        pytest.param({"not": c("category", "eq", "巡检")}, {"f2", "f3", "f4"}, id="not"),
        pytest.param(
            {
                "or": [
                    {"and": [c("category", "eq", "巡检"), c("year", "eq", 2024)]},
                    {"and": [c("category", "eq", "设备"), c("tags", "eq", "c")]},
                ]
            },
            {"f1", "f2"},
            id="(A and B) or (C and D)",
        ),
        pytest.param(
            {"not": {"or": [c("year", "exists"), c("tags", "exists")]}}, {"f3"}, id="not-or"
        ),
    ],
)
async def test_operator(
    client: httpx.AsyncClient, flt: dict[str, Any] | None, expected: set[str]
) -> None:
    assert await search_ids(client, flt) == expected


async def test_filter_errors_are_400_with_path(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/search",
        json={
            "query": "通用",
            "knowledge_ids": [FILTER_KB],
            "filter": {"or": [c("category", "eq", "x"), {"and": [c("year", "prefix", "2")]}]},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 400
    assert resp.json()["error_code"] == 3001
    assert resp.json()["path"] == "filter.or[1].and[0].op"


async def test_unknown_field_names_known_ones(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/search",
        json={"query": "通用", "knowledge_ids": [FILTER_KB], "filter": c("categroy", "eq", "x")},
        headers=auth("anon"),
    )
    assert resp.status_code == 400
    assert resp.json()["path"] == "filter.field"
    assert "category" in resp.json()["error_msg"] and "tags" in resp.json()["error_msg"]


async def retrieval_ids(
    client: httpx.AsyncClient, conditions: list[dict[str, Any]], logical: str | None = "and"
) -> set[str]:
    resp = await client.post(
        "/retrieval",
        json={
            "knowledge_id": FILTER_KB,
            "query": "通用",
            "retrieval_setting": {"top_k": 50, "score_threshold": 0},
            "metadata_condition": {"logical_operator": logical, "conditions": conditions},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 200, resp.text
    return {r["metadata"]["chunk_id"] for r in resp.json()["records"]}


def d(name: Any, op: str, value: Any = None) -> dict[str, Any]:
    return {"name": name, "comparison_operator": op, "value": value}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        pytest.param([d("category", "contains", "巡")], {"f1", "f4"}, id="contains"),
        pytest.param([d("category", "not contains", "巡")], {"f2", "f3"}, id="not-contains"),
        pytest.param([d("category", "start with", "巡检")], {"f1", "f4"}, id="start-with"),
        pytest.param([d("category", "end with", "备")], {"f2"}, id="end-with"),
        pytest.param([d("category", "is", "制度")], {"f3"}, id="is"),
        pytest.param([d("category", "is not", "制度")], {"f1", "f2", "f4"}, id="is-not"),
        pytest.param([d("category", "in", '["制度","设备"]')], {"f2", "f3"}, id="in-json-text"),
        pytest.param([d("category", "in", "制度,设备")], {"f2", "f3"}, id="in-comma-text"),
        pytest.param([d("category", "not in", "['制度', '设备']")], {"f1", "f4"}, id="not-in-py"),
        pytest.param([d("year", "empty")], {"f3"}, id="empty"),
        pytest.param([d("year", "not empty")], {"f1", "f2", "f4"}, id="not-empty"),
        pytest.param([d("year", "=", "2025")], {"f2"}, id="eq-text-number"),
        # Dify: a document without the field matches no operator but `empty` (f3 has no year).
        pytest.param([d("year", "≠", 2025)], {"f1", "f4"}, id="ne"),
        pytest.param([d("year", ">", "2024")], {"f2", "f4"}, id="gt"),
        pytest.param([d("year", "<", 2025)], {"f1"}, id="lt"),
        pytest.param([d("year", "≥", 2025)], {"f2", "f4"}, id="gte"),
        pytest.param([d("year", "≤", 2025)], {"f1", "f2"}, id="lte"),
        pytest.param([d("effective", "before", "2026-01-01")], {"f2"}, id="before-text"),
        pytest.param([d("effective", "after", 1767225600)], {"f1", "f4"}, id="after-timestamp"),
        pytest.param([d("effective", "after", "1767225600")], {"f1", "f4"}, id="after-ts-text"),
        pytest.param([d(["category"], "is", "设备")], {"f2"}, id="name-as-list"),
        pytest.param([d("category", "is", "巡检"), d("year", ">", 2024)], set(), id="and"),
    ],
)
async def test_dify_operator(
    client: httpx.AsyncClient, conditions: list[dict[str, Any]], expected: set[str]
) -> None:
    assert await retrieval_ids(client, conditions) == expected


async def test_dify_or(client: httpx.AsyncClient) -> None:
    ids = await retrieval_ids(client, [d("category", "is", "巡检"), d("year", ">", 2024)], "or")
    assert ids == {"f1", "f2", "f4"}


async def test_dify_bad_condition_is_400_with_path(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/retrieval",
        json={
            "knowledge_id": FILTER_KB,
            "query": "通用",
            "retrieval_setting": {"top_k": 5},
            "metadata_condition": {"conditions": [d("category", "is", "x"), d("year", "≈", 1)]},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 400
    assert resp.json()["path"] == "metadata_condition.conditions[1].comparison_operator"
