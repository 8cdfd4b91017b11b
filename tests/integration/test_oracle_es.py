"""No field oracle (design.md §4; issue #24 item 3): a field that only chunks the caller cannot
see have answers exactly like a field that exists nowhere — same status, same body — for every
operator, on /v1/search, the tool and /retrieval, and is never listed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch

from tests.support import DIFY_DESIGN_OPERATORS, app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import store_chunks

pytestmark = pytest.mark.anyio

KB = "oracle-kb"
HIDDEN = {"vendor": "西门子", "capacity": 630, "installed": "2024-05-01"}  # 运维工程师 only
ABSENT = "nowhere_at_all"
NATIVE = {
    "eq": "x", "ne": "x", "in": ["x"], "nin": ["x"], "any": ["x"], "all": ["x"], "none": ["x"],
    "contains": "x", "not_contains": "x", "prefix": "x", "suffix": "x", "gt": 5, "gte": 5,
    "lt": 5, "lte": 5, "between": [1, 2], "exists": None, "missing": None,
    "before": "2026-01-01", "after": "2026-01-01",
}  # fmt: skip
DIFY_VALUES: list[Any] = ["x", 5, "2026-01-01", None, ["x"], "abc"]


@pytest.fixture(scope="module")
def oracle_kb(corpus: str, es_sync: Elasticsearch) -> str:
    docs = {
        "oracle-public": {"content": "变压器 巡检 记录", "metadata": {"color": "红"}},
        "oracle-restricted": {
            "content": "变压器 巡检 参数",
            "access_roles": ["运维工程师"],
            "metadata": HIDDEN,
        },
    }
    store_chunks(es_sync, corpus, KB, docs)
    return corpus


@pytest.fixture
async def client(oracle_kb: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(oracle_kb)) as c:
        yield c
        assert postcheck_drops(c) == 0


def same(hidden: httpx.Response, absent: httpx.Response, name: str) -> None:
    """The two answers are one answer, but for the field's own name."""
    assert hidden.status_code == absent.status_code, (name, hidden.text, absent.text)
    assert hidden.text.replace(name, "F") == absent.text.replace(ABSENT, "F"), name
    for listed in HIDDEN:
        assert f"'{listed}'" in hidden.text or listed not in hidden.text, hidden.text


def native(field: str, op: str) -> dict[str, Any]:
    condition: dict[str, Any] = {"field": field, "op": op}
    if NATIVE[op] is not None:
        condition["value"] = NATIVE[op]
    return {"query": "变压器", "knowledge_ids": [KB], "filter": condition}


@pytest.mark.parametrize("op", sorted(NATIVE))
@pytest.mark.parametrize("field", sorted(HIDDEN))
async def test_native_and_tool(client: httpx.AsyncClient, field: str, op: str) -> None:
    for route, shape in (
        ("/v1/search", lambda b: b),
        (
            "/v1/tools/unified-search",
            lambda b: {"query": b["query"], "knowledge_ids": KB, "filter": json.dumps(b["filter"])},
        ),
    ):
        hidden = await client.post(route, json=shape(native(field, op)), headers=auth("anon"))
        absent = await client.post(route, json=shape(native(ABSENT, op)), headers=auth("anon"))
        same(hidden, absent, field)


@pytest.mark.parametrize("value", DIFY_VALUES, ids=repr)
@pytest.mark.parametrize("op", DIFY_DESIGN_OPERATORS)
async def test_dify_conditions(client: httpx.AsyncClient, op: str, value: Any) -> None:
    def body(name: str) -> dict[str, Any]:
        condition = {"name": name, "comparison_operator": op, "value": value}
        return {
            "knowledge_id": KB,
            "query": "变压器",
            "retrieval_setting": {"top_k": 5, "score_threshold": 0},
            "metadata_condition": {"logical_operator": "and", "conditions": [condition]},
        }

    absent = await client.post("/retrieval", json=body(ABSENT), headers=auth("anon"))
    for field in HIDDEN:
        hidden = await client.post("/retrieval", json=body(field), headers=auth("anon"))
        same(hidden, absent, field)


async def test_the_fields_are_real_for_those_who_see_them(client: httpx.AsyncClient) -> None:
    probe = await client.post("/v1/search", json=native(ABSENT, "eq"), headers=auth("ops"))
    listed = probe.json()["error_msg"].split("known fields: ")[1].split(", ")
    assert set(HIDDEN) <= set(listed), listed  # the 运维工程师 key's catalog names them
    gt = await client.post("/v1/search", json=native("capacity", "gt"), headers=auth("ops"))
    assert gt.status_code == 200 and gt.json()["chunk_count"] == 1
    anon = await client.post("/v1/search", json=native(ABSENT, "eq"), headers=auth("anon"))
    assert not set(HIDDEN) & set(anon.json()["error_msg"].split("known fields: ")[1].split(", "))
