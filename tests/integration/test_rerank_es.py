"""The optional reranker, against a local server speaking the Cohere/Jina rerank format that
Xinference and vLLM serve: it reorders the fused top-N, and a slow or failing one leaves the
fused order within the deadline (issue #13 item 5)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support import app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import SAMPLES_KB
from tests.support.fake_provider import SLOW_S, ServerThread

pytestmark = pytest.mark.anyio


class FakeReranker:
    """``POST /v1/rerank``: scores documents in reverse order of arrival (so a rerank is
    visible), or misbehaves as told."""

    def __init__(self) -> None:
        self.behaviour = "ok"
        self.requests: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def rerank(request: Request) -> Response:
            body = await request.json()
            self.requests.append(body)
            if self.behaviour == "slow":
                await asyncio.sleep(SLOW_S)
            if self.behaviour == "500":
                return PlainTextResponse("boom", status_code=500)
            if self.behaviour == "garbage":
                return JSONResponse({"unexpected": True})
            n = len(body["documents"])
            results = [{"index": i, "relevance_score": (i + 1) / (n + 1)} for i in range(n)]
            results.sort(key=lambda r: r["relevance_score"], reverse=True)
            return JSONResponse({"id": "r1", "results": results, "meta": {}})

        return Starlette(routes=[Route("/v1/rerank", rerank, methods=["POST"])])


@pytest.fixture(scope="module")
def reranker_server() -> Iterator[tuple[FakeReranker, str]]:
    fake = FakeReranker()
    with ServerThread(fake.app()) as server:
        yield fake, f"http://127.0.0.1:{server.port}/v1/rerank"


QUERY = {"query": "物业巡检 巡更 电梯 消防", "knowledge_ids": [SAMPLES_KB], "top_k": 2}


async def test_the_reranker_reorders_the_fused_top_n(
    corpus: str, reranker_server: tuple[FakeReranker, str]
) -> None:
    fake, url = reranker_server
    fake.behaviour = "ok"
    async with app_client(make_settings(corpus)) as plain:
        fused = (await plain.post("/v1/search", json=QUERY, headers=auth("anon"))).json()
    settings = make_settings(corpus, rerank_url=url, rerank_model="bge-reranker", rerank_top_n=4)
    async with app_client(settings) as c:
        fake.requests.clear()
        body = (await c.post("/v1/search", json=QUERY, headers=auth("anon"))).json()
        assert postcheck_drops(c) == 0
    sent = fake.requests[0]
    assert sent["model"] == "bge-reranker" and sent["query"] == QUERY["query"]
    assert len(sent["documents"]) == 4  # the fused top-N, not only top_k
    assert body["meta"]["rerank"] == "ok"
    got = [c["content"] for c in body["chunk_metadata"]]
    assert got == list(reversed(sent["documents"]))[:2]  # the reranker's order
    assert got != [c["content"] for c in fused["chunk_metadata"]]
    scores = [c["score"] for c in body["chunk_metadata"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


@pytest.mark.parametrize("behaviour", ["slow", "500", "garbage"])
async def test_a_failing_reranker_keeps_the_fused_order(
    corpus: str, reranker_server: tuple[FakeReranker, str], behaviour: str
) -> None:
    fake, url = reranker_server
    fake.behaviour = "ok"
    async with app_client(make_settings(corpus)) as plain:
        fused = (await plain.post("/v1/search", json=QUERY, headers=auth("anon"))).json()
    fake.behaviour = behaviour
    settings = make_settings(corpus, rerank_url=url, rerank_timeout_s=2.0)
    async with app_client(settings) as c:
        started = time.perf_counter()
        resp = await c.post("/v1/search", json=QUERY, headers=auth("anon"))
        elapsed = time.perf_counter() - started
    assert resp.status_code == 200
    body = resp.json()
    assert body["meta"]["rerank"] == ("timeout" if behaviour == "slow" else "error")
    assert [c["content"] for c in body["chunk_metadata"]] == [
        c["content"] for c in fused["chunk_metadata"]
    ]
    assert elapsed < SLOW_S / 2  # never waits for a slow reranker
    fake.behaviour = "ok"
