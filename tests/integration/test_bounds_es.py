"""No request holds a worker, nothing a caller sent is echoed unbounded (issue #36 §5):
/v1/merge refuses more results than it takes before it looks at them; knowledge-base ids
have one length cap on every route; a 404 names at most a bounded prefix of what was asked."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from retrieval_svc.acl.values import MAX_ID_LENGTH
from retrieval_svc.merge import MAX_MERGE_ITEMS
from retrieval_svc.retrieval import ECHO_CHARS, ECHO_NAMES
from tests.support import app_client, auth, make_settings
from tests.support.mcp import MCP_HEADERS, rpc

pytestmark = pytest.mark.anyio


async def test_a_merge_of_sixty_thousand_results_is_refused_at_once(corpus: str) -> None:
    tiny: list[dict[str, Any]] = [{}] * 60_000  # 240 KB, well under the 1 MiB body cap
    async with app_client(make_settings(corpus)) as c:
        for body, path in (
            ({"rag_chunks": tiny}, "rag_chunks"),
            ({"web_chunks": tiny}, "web_chunks"),
            ({"web_chunks": [{"references": [{"content": "x"}] * 900}] * 3}, "web_chunks"),
        ):
            started = time.perf_counter()
            resp = await c.post("/v1/merge", json=body, headers=auth("anon"))
            took = time.perf_counter() - started
            assert resp.status_code == 400 and resp.json()["path"] == path, resp.text[:300]
            assert f"more than {MAX_MERGE_ITEMS:,} results" in resp.json()["error_msg"]
            assert took < 5, took  # (the loop was held 4.3 s; a generous bound for busy CI)
        most = [{"content": "x", "metadata": {}}] * MAX_MERGE_ITEMS
        ok = await c.post("/v1/merge", json={"rag_chunks": most}, headers=auth("anon"))
    assert ok.status_code == 200 and ok.json()["chunk_count"] == MAX_MERGE_ITEMS


async def test_knowledge_ids_have_one_cap_and_are_echoed_bounded(corpus: str) -> None:
    long_id = "k" * 500_000
    many = [f"{i:03d}" + "x" * (MAX_ID_LENGTH - 3) for i in range(50)]
    search: dict[str, Any] = {"query": "巡更", "top_k": 3}
    headers = {**MCP_HEADERS, **auth("ops")}  # (a fixed key: MCP needs no identity header)
    call = rpc(
        "tools/call", {"name": "search", "arguments": {**search, "knowledge_ids": [long_id]}}
    )
    async with app_client(make_settings(corpus)) as c:

        async def post(path: str, knowledge_ids: Any) -> Any:
            body = {**search, "knowledge_ids": knowledge_ids}
            return await c.post(path, json=body, headers=auth("anon"))

        too_long = await post("/v1/search", [long_id])
        tool = await post("/v1/tools/unified-search", long_id)
        over_mcp = await c.post("/mcp", json=call, headers=headers)
        absent = await post("/v1/search", many)
    for resp in (too_long, tool):
        assert resp.status_code == 400 and len(resp.content) < 1000, resp.text[:300]
    result = over_mcp.json()["result"]
    assert result["isError"] and len(json.dumps(result)) < 1000, str(result)[:300]
    assert absent.status_code == 404
    message = absent.json()["error_msg"]
    assert len(message) < ECHO_NAMES * (ECHO_CHARS + 8) + 100, len(message)
    assert f"and {50 - ECHO_NAMES} more" in message and many[0][:ECHO_CHARS] in message
