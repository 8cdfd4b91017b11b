"""Operations (design.md §11): metrics move, readiness drops and recovers without a restart,
one JSON log line per request with a request id, and no secret or content in any log."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.errors import ConfigurationError
from tests.support import ES_URL, KEYS, app_client, auth, key_entry, make_settings
from tests.support.corpus import SAMPLES_KB
from tests.support.fake_provider import FakeProvider, free_port
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.anyio

TOKEN_SECRET = "signing-secret-for-operations-tests-0123456789"
SIGNED_KEY = "test-key-signed-ops-0123456789"
PROVIDER_KEY = "sk-provider-key-never-logged"


def samples(metrics_text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(
    all_samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return sum(
        v for (n, ls), v in all_samples.items() if n == name and set(labels.items()) <= set(ls)
    )


@pytest.fixture
async def client(corpus: str, provider: FakeProvider) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        corpus,
        api_keys=[
            key_entry("anon", tenant="acme", mode=IdentityMode.TRUSTED),
            ApiKeyConfig(
                name="signed-key",
                sha256=hash_key(SIGNED_KEY),
                tenant="acme",
                mode=IdentityMode.SIGNED,
                token_secret=TOKEN_SECRET,
            ),
        ],
        web_provider="tavily",
        web_api_key=PROVIDER_KEY,
        web_base_url=provider.url,
        web_cache_ttl_s=0,
    )
    async with app_client(settings) as c:
        yield c


async def test_metrics_move_with_traffic(client: httpx.AsyncClient) -> None:
    before = samples((await client.get("/metrics")).text)
    body = {
        "knowledge_id": SAMPLES_KB,
        "query": "巡更",
        "retrieval_setting": {"top_k": 3, "score_threshold": 0},
    }
    assert (await client.post("/retrieval", json=body, headers=auth("anon"))).status_code == 200
    assert (await client.post("/retrieval", json=body)).status_code == 403
    web = {"query": "巡检", "knowledge_ids": [SAMPLES_KB], "web": {"enabled": True}}
    assert (await client.post("/v1/search", json=web, headers=auth("anon"))).status_code == 200
    after = samples((await client.get("/metrics")).text)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("rsvc_http_requests_total", route="/retrieval", status="200") == 1
    assert moved("rsvc_http_requests_total", route="/retrieval", status="403") == 1
    assert moved("rsvc_http_request_duration_seconds_count", route="/v1/search") == 1
    assert (
        moved("rsvc_elasticsearch_request_duration_seconds_count", operation="search", outcome="ok")
        == 2
    )
    assert moved("rsvc_web_search_duration_seconds_count", provider="tavily", outcome="ok") == 1
    assert moved("rsvc_chunks_returned_total", source_type="rag") >= 3
    assert moved("rsvc_chunks_returned_total", source_type="web") >= 1
    assert moved("rsvc_auth_failures_total", reason="MalformedAuthorization") == 1
    assert value(after, "rsvc_acl_postcheck_drops_total") == 0
    assert value(after, "rsvc_build_info") == 1


async def test_metric_labels_are_bounded(client: httpx.AsyncClient) -> None:
    await client.get("/no/such/path/12345")
    await client.post(
        "/retrieval",
        json={
            "knowledge_id": "secret-kb-name",
            "query": "私密查询",
            "retrieval_setting": {"top_k": 1},
        },
        headers=auth("anon"),
    )
    text = (await client.get("/metrics")).text
    for leaked in ("/no/such/path", "secret-kb-name", "私密查询", KEYS["anon"]):
        assert leaked not in text
    assert 'route="unmatched"' in text


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    with TcpProxy(ES_URL) as p:
        yield p


async def test_readiness_drops_and_recovers_without_restart(corpus: str, proxy: TcpProxy) -> None:
    body = {"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 2}}
    deadline_s = 20.0  # a lost cluster must answer 503 from the refused connection, not this
    async with app_client(
        make_settings(corpus, es_url=proxy.url, request_deadline_s=deadline_s)
    ) as c:
        assert (await c.get("/readyz")).status_code == 200
        assert (await c.post("/retrieval", json=body, headers=auth("anon"))).status_code == 200
        proxy.cut()
        ready = await c.get("/readyz")
        started = time.perf_counter()
        down = await c.post("/retrieval", json=body, headers=auth("anon"))
        elapsed = time.perf_counter() - started
        assert ready.status_code == 503 and ready.json()["ready"] is False
        assert (await c.get("/healthz")).status_code == 200  # alive, just not ready
        assert down.status_code == 503 and down.json()["error_code"] == 5001
        assert elapsed < deadline_s / 4
        proxy.restore()
        deadline = time.monotonic() + 60
        while (await c.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, "readiness did not recover"
            await asyncio.sleep(0.2)
        assert (await c.post("/retrieval", json=body, headers=auth("anon"))).status_code == 200


async def test_readiness_needs_the_alias(corpus: str) -> None:
    async with app_client(
        make_settings(corpus, index_alias="rsvc-never-created", manage_index=False)
    ) as c:
        resp = await c.get("/readyz")
    assert resp.status_code == 503 and "alias" in resp.json()["reason"]


async def test_one_json_line_per_request_without_secrets(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = jwt.encode(
        {"sub": "wang", "roles": ["物业经理"], "tenant": "acme", "exp": time.time() + 60},
        TOKEN_SECRET,
        algorithm="HS256",
    )
    query = "配电房倒闸操作的机密问题"
    resp = await client.post(
        "/retrieval",
        json={
            "knowledge_id": SAMPLES_KB,
            "query": query,
            "retrieval_setting": {"top_k": 3, "score_threshold": 0},
            "metadata_condition": {
                "conditions": [
                    {"name": "principal_token", "comparison_operator": "is", "value": token}
                ]
            },
        },
        headers={"Authorization": f"Bearer {SIGNED_KEY}", "X-Request-ID": "req-abc.123"},
    )
    assert resp.status_code == 200
    assert resp.headers["x-request-id"] == "req-abc.123"
    contents = [r["content"] for r in resp.json()["records"]]
    assert contents
    await client.post(
        "/v1/search",
        json={"query": "巡检", "knowledge_ids": [SAMPLES_KB], "web": {"enabled": True}},
        headers=auth("anon"),
    )
    await client.post("/retrieval", json={}, headers={"Authorization": f"Bearer {KEYS['anon']}x"})

    access = [r for r in caplog.records if r.name == "rsvc.access"]
    assert len(access) == 3
    line = access[0].fields  # type: ignore[attr-defined]
    assert line["request_id"] == "req-abc.123"
    assert (line["route"], line["status"], line["key"], line["tenant"]) == (
        "/retrieval",
        200,
        "signed-key",
        "acme",
    )
    assert line["knowledge_ids"] == [SAMPLES_KB] and line["rag_chunks"] == len(contents)
    assert line["anonymous"] is False and line["duration_ms"] > 0
    assert access[2].fields["auth_error"] == "AuthorizationFailed"  # type: ignore[attr-defined]

    everything = caplog.text + "\n".join(
        json.dumps(getattr(r, "fields", {}), ensure_ascii=False) for r in caplog.records
    )
    for secret in (SIGNED_KEY, KEYS["anon"], token, TOKEN_SECRET, PROVIDER_KEY, query, *contents):
        assert secret not in everything, f"leaked into logs: {secret[:20]}…"


async def test_generated_request_ids_are_unique(client: httpx.AsyncClient) -> None:
    ids = {
        (await client.get("/healthz", headers={"X-Request-ID": "bad id!"})).headers["x-request-id"]
        for _ in range(3)
    }
    assert len(ids) == 3 and all(len(i) == 32 for i in ids)


async def test_every_answer_is_no_store(client: httpx.AsyncClient) -> None:
    body = {"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 2}}
    answers = [
        await client.post("/retrieval", json=body, headers=auth("anon")),
        await client.post("/retrieval", json=body),  # an error carries no-store too
        await client.post(
            "/v1/search",
            json={"query": "巡更", "knowledge_ids": [SAMPLES_KB]},
            headers=auth("anon"),
        ),
        await client.get("/healthz"),
    ]
    assert [a.headers.get("cache-control") for a in answers] == ["no-store"] * len(answers)


async def test_api_docs_can_be_turned_off(corpus: str) -> None:
    async with app_client(make_settings(corpus, api_docs=False)) as c:
        gone = [(await c.get(p)).status_code for p in ("/docs", "/redoc", "/openapi.json")]
        tool = await c.get("/v1/tools/openapi.json")  # the Dify tool's document stays
    assert gone == [404, 404, 404] and tool.status_code == 200
    async with app_client(make_settings(corpus)) as c:
        assert (await c.get("/openapi.json")).status_code == 200  # on by default (development)


async def test_a_console_that_is_off_says_how_to_turn_it_on(corpus: str) -> None:
    async with app_client(make_settings(corpus, console=False)) as c:
        pages = [await c.get(p) for p in ("/console", "/console/search", "/console/login")]
    for page in pages:
        assert page.status_code == 404  # (nothing is served there)
        assert "RSVC_CONSOLE=true" in page.text and "控制台未开启" in page.text, page.text


async def test_metrics_behind_the_api_key(corpus: str) -> None:
    async with app_client(make_settings(corpus, metrics="key")) as c:
        refused = await c.get("/metrics")
        served = await c.get("/metrics", headers=auth("anon"))
    assert refused.status_code == 403  # as every route answers a missing key
    assert served.status_code == 200 and "rsvc_build_info" in served.text


async def test_metrics_on_their_own_port(corpus: str) -> None:
    port = free_port()
    async with app_client(make_settings(corpus, metrics="port", metrics_port=port)) as c:
        on_api_port = await c.get("/metrics", headers=auth("anon"))
        await c.post(
            "/retrieval",
            json={"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 1}},
            headers=auth("anon"),
        )
        async with httpx.AsyncClient() as plain:
            scraped = await plain.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    assert on_api_port.status_code == 404
    counted = [
        sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if sample.name == "rsvc_http_requests_total" and sample.labels["route"] == "/retrieval"
    ]
    assert scraped.status_code == 200 and counted == [1.0]  # the same registry the app counts in
    with pytest.raises(httpx.ConnectError):  # stopped with the app
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


async def test_metrics_port_in_use_refuses_to_start(corpus: str) -> None:
    port = free_port()
    async with app_client(make_settings(corpus, metrics="port", metrics_port=port)):
        with pytest.raises(ConfigurationError, match="RSVC_METRICS_PORT"):
            async with app_client(make_settings(corpus, metrics="port", metrics_port=port)):
                pass


def test_serve_sends_no_server_banner(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"name": "k", "sha256": hash_key("banner-key-0123456789")}]))
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RSVC_")},
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_EMBEDDER": "none",
        "RSVC_ES_URL": f"http://127.0.0.1:{free_port()}",  # not needed for /healthz
        "RSVC_PORT": str(port),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", "from retrieval_svc.cli import app; app()", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                assert child.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        assert resp.status_code == 200
        assert "server" not in resp.headers
        assert resp.headers["cache-control"] == "no-store"
    finally:
        child.terminate()
        child.wait(timeout=20)


async def test_a_key_file_edit_is_in_force_without_a_restart(corpus: str, tmp_path: Path) -> None:
    """Issue #58 §2: a key added, and a key's unknown_user turned to refuse, are in force
    within the policy's check interval; a file that does not load changes nothing and says
    why; /readyz names the digest of the file in force."""
    first, second = "keyfile-first-0123456789", "keyfile-second-0123456789"
    path = tmp_path / "keys.json"
    entry = {"name": "first", "sha256": hash_key(first), "tenant": "acme", "mode": "trusted"}
    path.write_text(json.dumps([entry]))
    settings = make_settings(corpus, api_keys=[], api_keys_file=path, policy_check_interval_s=0.2)
    body = {"query": "巡更", "knowledge_ids": [SAMPLES_KB], "principal": {"user_id": "nobody"}}

    def bearer(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    async def until(check: Callable[[], Awaitable[bool]]) -> None:
        async with asyncio.timeout(60):  # (the interval is 0.2 s; a busy machine is slower)
            while not await check():
                await asyncio.sleep(0.1)

    async with app_client(settings) as c:
        ready = (await c.get("/readyz")).json()["api_keys_file"]
        assert ready["keys"] == 1 and ready["error"] is None
        assert (await c.post("/v1/search", json=body, headers=bearer(second))).status_code == 403
        assert (await c.post("/v1/search", json=body, headers=bearer(first))).status_code == 200
        refusing = {**entry, "unknown_user": "refuse"}
        added = {**entry, "name": "second", "sha256": hash_key(second)}
        path.write_text(json.dumps([refusing, added]))

        async def second_works() -> bool:
            answer = await c.post("/v1/search", json=body, headers=bearer(second))
            return answer.status_code == 200

        await until(second_works)
        refused = await c.post("/v1/search", json=body, headers=bearer(first))
        assert refused.status_code == 403, refused.text  # (unknown_user: refuse, now)
        now = (await c.get("/readyz")).json()["api_keys_file"]
        assert now["keys"] == 2 and now["digest"] != ready["digest"]
        path.write_text("[not json")  # (a file being written, or wrong: the keys stay)

        async def said_why() -> bool:
            return bool((await c.get("/readyz")).json()["api_keys_file"]["error"])

        await until(said_why)
        assert (await c.post("/v1/search", json=body, headers=bearer(second))).status_code == 200
