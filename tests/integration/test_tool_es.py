"""The Dify tool, /v1/search with web, /v1/merge, citations and /retrieval's web records,
end to end against the real Elasticsearch and a local provider (design.md §8 to §10)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from retrieval_svc.auth.keys import IdentityMode
from retrieval_svc.chunks import UnifiedChunk
from retrieval_svc.schemas import ToolRequest
from tests.support import SEED_FIELDS, app_client, auth, key_entry, make_settings, postcheck_drops
from tests.support.corpus import SAMPLES_KB
from tests.support.fake_provider import SLOW_S, FakeProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(corpus: str, provider: FakeProvider) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        corpus,
        api_keys=[
            key_entry("anon", tenant="acme", mode=IdentityMode.TRUSTED),
            key_entry("ops", tenant="acme", mode=IdentityMode.CASBIN),
        ],
        web_provider="bocha",
        web_api_key="sk-provider-secret-value",
        web_base_url=provider.url,
        # Loopback, but the machine may be busy (a garbage answer once took over 2 s to be
        # read at load): room enough for an answer to be judged, still far below SLOW_S.
        web_timeout_s=5.0,
        request_deadline_s=8.0,
        web_max_results=2,
        web_cache_ttl_s=0,
        web_knowledge_ids=["building-*"],
        public_url="https://rsvc.example.com/",
    )
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0


async def tool(client: httpx.AsyncClient, **params: Any) -> httpx.Response:
    body = {"query": "物业巡检 巡更", "knowledge_ids": SAMPLES_KB, **params}
    return await client.post("/v1/tools/unified-search", json=body, headers=auth("anon"))


async def test_tool_output_is_the_code_nodes(client: httpx.AsyncClient) -> None:
    resp = await tool(client, web=True, top_k=3)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert set(out) == {"formatted_chunks", "chunk_count", "chunk_metadata", "meta"}
    assert out["meta"] == {"mode": "bm25", "web": {"status": "ok", "detail": ""}}
    chunks = out["chunk_metadata"]
    assert out["chunk_count"] == len(chunks) == 5  # 3 from the knowledge base, 2 from the web
    assert [c["id"] for c in chunks] == ["1", "2", "3", "4", "5"]
    assert [c["source_type"] for c in chunks] == ["rag", "rag", "rag", "web", "web"]
    rag_scores = [c["score"] for c in chunks[:3]]
    assert rag_scores == sorted(rag_scores, reverse=True)
    assert out["formatted_chunks"] == "\n\n".join(f"[C:{c['id']}]\n{c['content']}" for c in chunks)
    web = chunks[3]
    assert web["display_subtitle"] == "知乎 · 2025-08-12"
    assert web["site_host"] == "zhihu.com"
    for chunk in chunks:
        assert SEED_FIELDS <= set(chunk)


async def test_tool_takes_string_parameters(
    client: httpx.AsyncClient, provider: FakeProvider
) -> None:
    resp = await tool(
        client,
        knowledge_ids='["building-ops"]',
        top_k="2",
        web="false",
        user_roles="物业经理,运维工程师",
        user_id="",
    )
    assert resp.status_code == 200, resp.text
    assert [c["source_type"] for c in resp.json()["chunk_metadata"]] == ["rag", "rag"]
    assert provider.requests == []  # web off: the provider is never asked


async def test_tool_filter_as_json_text(client: httpx.AsyncClient) -> None:
    resp = await tool(
        client,
        query="会议室 预约 巡检",
        filter='{"field": "category", "op": "eq", "value": "服务"}',
    )
    assert resp.status_code == 200
    assert {c["document_title"] for c in resp.json()["chunk_metadata"]} == {"访客与会议室服务指南"}
    bad = await tool(client, filter='{"field": "category", "op": "eq"')
    assert bad.status_code == 400 and bad.json()["path"] == "filter"


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        ("slow", "timeout"),
        ("429", "error"),
        ("500", "error"),
        ("garbage", "error"),
        ("error-body", "error"),
    ],
)
async def test_web_failures_degrade(
    client: httpx.AsyncClient, provider: FakeProvider, behaviour: str, status: str
) -> None:
    provider.reset(behaviour)
    resp = await client.post(
        "/v1/search",
        json={
            "query": "物业巡检",
            "knowledge_ids": [SAMPLES_KB],
            "top_k": 3,
            "web": {"enabled": True},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["meta"]["web"] == {
        "status": status,
        "provider": "bocha",
        "took_ms": body["meta"]["web"]["took_ms"],
        "detail": body["meta"]["web"]["detail"],
    }
    assert body["meta"]["web"]["detail"], "a failed web search says why"
    assert [c["source_type"] for c in body["chunk_metadata"]] == ["rag"] * 3
    assert body["meta"]["took_ms"] < SLOW_S * 1000 / 2  # never waits for a slow provider
    tool_resp = await tool(client, web=True, top_k=2)
    assert tool_resp.status_code == 200 and tool_resp.json()["chunk_count"] == 2


async def test_web_status_ok_and_disabled(client: httpx.AsyncClient) -> None:
    on = await client.post(
        "/v1/search",
        json={
            "query": "巡检",
            "knowledge_ids": [SAMPLES_KB],
            "web": {"enabled": True, "max_results": 1},
        },
        headers=auth("anon"),
    )
    off = await client.post(
        "/v1/search", json={"query": "巡检", "knowledge_ids": [SAMPLES_KB]}, headers=auth("anon")
    )
    assert on.json()["meta"]["web"]["status"] == "ok"
    assert sum(c["source_type"] == "web" for c in on.json()["chunk_metadata"]) == 1
    assert off.json()["meta"]["web"]["status"] == "disabled"


async def test_refused_request_costs_no_provider_call(
    client: httpx.AsyncClient, provider: FakeProvider
) -> None:
    resp = await client.post(
        "/v1/search",
        json={
            "query": "巡检",
            "knowledge_ids": [SAMPLES_KB],
            "web": {"enabled": True},
            "principal": {"roles": ["物业经理"]},
        },
        headers=auth("ops"),  # casbin mode: role claims are refused
    )
    assert resp.status_code == 403
    assert provider.requests == []


async def test_openapi_document_is_valid_3_0(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/tools/openapi.json")
    doc = resp.json()
    validate(doc)
    assert doc["openapi"].startswith("3.0")
    assert doc["servers"] == [{"url": "https://rsvc.example.com"}]
    ops = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert ops == {"unified_search", "resolve_citations"}
    params = doc["paths"]["/v1/tools/unified-search"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["properties"]
    # Generated from the models the route validates with: nothing can drift apart.
    assert set(params) == set(ToolRequest.model_fields)
    assert {"score_threshold", "mode"} <= set(params)
    response = doc["paths"]["/v1/tools/unified-search"]["post"]["responses"]["200"]
    out = response["content"]["application/json"]["schema"]["properties"]
    assert set(out) == {"formatted_chunks", "chunk_count", "chunk_metadata", "meta"}
    chunk = out["chunk_metadata"]["items"]["properties"]
    assert set(chunk) == set(UnifiedChunk.model_fields) >= {"chunk_id", "document_id", "metadata"}
    assert all(p["type"] in ("string", "integer", "number", "boolean") for p in params.values())


def _texts(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        found = [
            v for k, v in doc.items() if k in ("description", "summary") and isinstance(v, str)
        ]
        return found + [t for k, v in doc.items() if k not in ("description", "summary")
                        for t in _texts(v)]  # fmt: skip
    return [t for v in doc for t in _texts(v)] if isinstance(doc, list) else []


async def test_the_tool_document_speaks_the_reader_s_language(
    client: httpx.AsyncClient, corpus: str
) -> None:
    """Dify's tool editor shows the descriptions: Chinese for a zh-CN reader, or for every
    request naming none when RSVC_DEFAULT_LANGUAGE=zh-CN (Dify sends no Accept-Language);
    the same document otherwise (only its words differ)."""
    english = (await client.get("/v1/tools/openapi.json")).json()
    chinese = (
        await client.get("/v1/tools/openapi.json", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    ).json()
    validate(chinese)
    assert chinese["paths"].keys() == english["paths"].keys()
    texts = _texts(chinese)
    assert len(texts) == len(_texts(english)) >= 20
    cjk = re.compile(r"[\u4e00-\u9fff]")
    assert all(cjk.search(t) for t in texts), [t for t in texts if not cjk.search(t)]
    query = chinese["paths"]["/v1/tools/unified-search"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["properties"]["query"]
    assert query["description"] == "用户的问题，作为检索词。"
    async with app_client(make_settings(corpus, default_language="zh-CN")) as zh_server:
        default = (await zh_server.get("/v1/tools/openapi.json")).json()
        asked = await zh_server.get("/v1/tools/openapi.json", headers={"Accept-Language": "en"})
    assert _texts(default) == texts and _texts(asked.json()) == _texts(english)


async def test_merge_endpoint_is_a_drop_in(client: httpx.AsyncClient) -> None:
    body = {
        "rag_chunks": [
            {
                "content": "巡更人员执行巡检计划时...",
                "metadata": {
                    "score": 0.73,
                    "dataset_name": "测试知识库20260610",
                    "doc_metadata": {"document_title": "巡更操作指南 v2.1"},
                },
            }
        ],
        "web_chunks": [
            {
                "references": [
                    {
                        "title": "a",
                        "url": "https://www.zhihu.com/q",
                        "content": "甲",
                        "website": "知乎",
                        "date": "2025-08-12 10:00:00",
                        "authority_score": 0.9,
                    },
                    {"title": "b", "url": "https://b.com", "content": "乙"},
                    {"title": "c", "url": "https://c.com", "content": "丙"},
                ],
                "request_id": "r",
            }
        ],
    }
    default = (await client.post("/v1/merge", json=body, headers=auth("anon"))).json()
    assert default["chunk_count"] == 3  # RSVC_WEB_MAX_RESULTS = 2 in this app
    assert default["chunk_metadata"][1]["display_subtitle"] == "知乎 · 2025-08-12"
    assert set(default["chunk_metadata"][0]) == SEED_FIELDS
    one = (
        await client.post("/v1/merge", json={**body, "max_web_results": 1}, headers=auth("anon"))
    ).json()
    assert one["formatted_chunks"] == "[C:1]\n巡更人员执行巡检计划时...\n\n[C:2]\n甲"
    unauth = await client.post("/v1/merge", json=body)
    assert unauth.status_code == 403


async def test_citations_endpoint(client: httpx.AsyncClient) -> None:
    chunks = (await tool(client, top_k=3)).json()["chunk_metadata"]
    resp = await client.post(
        "/v1/citations/resolve",
        json={"answer": "先[C:3]后[C:1][C:3]，另[C:7]。", "chunk_metadata": chunks},
        headers=auth("anon"),
    )
    out = resp.json()
    assert out["answer"] == "先[C:1]后[C:2][C:1]，另。"
    assert [c["id"] for c in out["citations"]] == ["3", "1"]
    assert out["uncited_ids"] == ["2"] and out["unknown_ids"] == ["7"]


async def retrieval(
    client: httpx.AsyncClient, top_k: int, threshold: float = 0.0
) -> list[dict[str, Any]]:
    resp = await client.post(
        "/retrieval",
        json={
            "knowledge_id": SAMPLES_KB,
            "query": "物业巡检 巡更",
            "retrieval_setting": {"top_k": top_k, "score_threshold": threshold},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 200, resp.text
    records: list[dict[str, Any]] = resp.json()["records"]
    return records


async def test_retrieval_merges_web_for_configured_kbs(client: httpx.AsyncClient) -> None:
    records = await retrieval(client, top_k=6)
    kinds = [r["metadata"]["source_type"] for r in records]
    assert kinds == ["rag"] * 4 + ["web"] * 2
    web = records[4]
    assert web["metadata"]["url"].startswith("https://") and web["title"]
    assert all(0.0 <= r["score"] <= 1.0 for r in records)
    assert [r["metadata"]["id"] for r in records] == [str(i) for i in range(1, 7)]
    small = await retrieval(client, top_k=2)
    assert [r["metadata"]["source_type"] for r in small] == ["rag", "web"]


async def test_retrieval_threshold_applies_to_web_records(client: httpx.AsyncClient) -> None:
    records = await retrieval(client, top_k=6, threshold=0.05)  # Bocha gives no score: 0
    assert records and all(r["metadata"]["source_type"] == "rag" for r in records)


async def test_retrieval_without_web_for_other_kbs(
    client: httpx.AsyncClient, provider: FakeProvider
) -> None:
    resp = await client.post(
        "/retrieval",
        json={
            "knowledge_id": "acl-forms",
            "query": "消防演练",
            "retrieval_setting": {"top_k": 5, "score_threshold": 0},
        },
        headers=auth("anon"),
    )
    assert resp.status_code == 200
    assert all(r["metadata"]["source_type"] == "rag" for r in resp.json()["records"])
    assert provider.requests == []


async def test_web_asked_for_without_a_provider_says_so(corpus: str) -> None:
    async with app_client(make_settings(corpus)) as c:  # no RSVC_WEB_PROVIDER
        resp = await c.post(
            "/v1/tools/unified-search",
            json={"query": "物业巡检", "knowledge_ids": SAMPLES_KB, "web": True},
            headers=auth("anon"),
        )
        quiet = await c.post(
            "/v1/tools/unified-search",
            json={"query": "物业巡检", "knowledge_ids": SAMPLES_KB},
            headers=auth("anon"),
        )
    assert resp.status_code == 200
    web = resp.json()["meta"]["web"]
    assert web["status"] == "disabled" and "no provider is configured" in web["detail"]
    assert quiet.json()["meta"]["web"] == {"status": "disabled", "detail": ""}


@pytest.mark.parametrize(
    ("body", "path"),
    [
        pytest.param({"rag_chunks": "oops"}, "rag_chunks", id="rag-text"),
        pytest.param({"web_chunks": {"hits": []}}, "web_chunks", id="web-unknown-object"),
        pytest.param({"web_chunks": [{"content": "a"}, 1]}, "web_chunks[1]", id="web-item"),
    ],
)
async def test_merge_refuses_shapes_it_does_not_know(
    client: httpx.AsyncClient, body: dict[str, Any], path: str
) -> None:
    resp = await client.post("/v1/merge", json=body, headers=auth("anon"))
    assert resp.status_code == 400
    assert resp.json()["error_code"] == 3001 and resp.json()["path"] == path
