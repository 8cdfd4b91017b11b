"""The audit trail (issue #28 §1; design.md §14): an event per retrieval on every route
carrying exactly what was returned; a sink that never fails or slows a request; retention."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from elasticsearch import AsyncElasticsearch
from typer.testing import CliRunner

from retrieval_svc.audit import audit_index, audit_prefix, user_token
from retrieval_svc.cli import app as svc_cli
from tests.support import ES_URL, app_client, auth, key_entry, make_settings, metric_sample
from tests.support.corpus import ACL_KB, SAMPLES_KB, TENANT
from tests.support.mcp import MCP_HEADERS, rpc

pytestmark = pytest.mark.anyio
HASH_KEY = "audit-hash-key-for-tests-0123456789abcdef"


@pytest.fixture
async def audited(corpus: str) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The app with the Elasticsearch sink, under a private alias prefix for its indices."""
    prefix = corpus
    settings = make_settings(
        corpus,
        audit="elasticsearch",
        audit_user="hash",
        audit_hash_key=HASH_KEY,
        api_keys=[key_entry("anon", tenant=TENANT, mode="trusted")],
    )
    async with app_client(settings) as c:
        yield c, prefix
    es = AsyncElasticsearch(ES_URL)
    await es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(corpus)}*")
    await es.close()


def events_counted(c: httpx.AsyncClient, outcome: str) -> float:
    return metric_sample(c, "rsvc_audit_events_total", {"outcome": outcome}) or 0.0


async def written(c: httpx.AsyncClient, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while events_counted(c, "written") < at_least:
        assert time.monotonic() < deadline, "the audit events were not written"
        await asyncio.sleep(0.1)


async def events(alias: str) -> dict[str, dict[str, Any]]:
    es = AsyncElasticsearch(ES_URL)
    try:
        await es.indices.refresh(index=f"{audit_prefix(alias)}*")
        found = await es.search(index=f"{audit_prefix(alias)}*", size=100)
        return {h["_source"]["request_id"]: h["_source"] for h in found["hits"]["hits"]}
    finally:
        await es.close()


async def chunk_title(alias: str, document: str) -> str:
    es = AsyncElasticsearch(ES_URL)
    try:
        found = await es.search(
            index=f"{alias}.*", query={"term": {"document_id": document}}, size=1
        )
        return str(found["hits"]["hits"][0]["_source"]["document_title"])
    finally:
        await es.close()


def chunk_ids(route: str, body: dict[str, Any]) -> list[str]:
    if route == "/retrieval":
        return [r["metadata"]["chunk_id"] for r in body["records"]]
    if route == "/mcp":
        return [c["chunk_id"] for c in body["result"]["structuredContent"]["chunk_metadata"]]
    return [c["chunk_id"] for c in body["chunk_metadata"]]


async def test_mcp_reads_and_listings_are_audited(audited: tuple[httpx.AsyncClient, str]) -> None:
    # Issue #36 §3: a whole restricted document read over MCP once left no trace.
    c, alias = audited
    manager = {
        **MCP_HEADERS,
        **auth("anon"),
        "X-Rsvc-User": "wang",
        "X-Rsvc-Roles": quote("物业经理"),
    }
    read = {"name": "read_document", "arguments": {"document_id": "acl-mgr"}}
    calls = {
        "read_document": rpc("tools/call", read),
        "list": rpc("tools/call", {"name": "list_knowledge_bases", "arguments": {}}),
    }
    sent = {}
    for mode, call in calls.items():
        request_id = uuid.uuid4().hex
        resp = await c.post("/mcp", json=call, headers={**manager, "X-Request-ID": request_id})
        assert resp.status_code == 200 and not resp.json()["result"].get("isError"), resp.text
        sent[request_id] = (mode, resp.json()["result"]["structuredContent"])
    await written(c, len(calls))
    recorded = await events(alias)
    for request_id, (mode, content) in sent.items():
        event = recorded[request_id]
        assert event["route"] == "/mcp" and event["mode"] == mode and event["key"] == "anon"
        assert event["user"] == user_token("wang", "hash", HASH_KEY.encode())
        if mode == "read_document":
            assert event["chunks"] == [ch["chunk_id"] for ch in content["chunks"]] == ["acl-mgr"]
            assert event["knowledge_ids"] == [ACL_KB]
        else:
            listed = [kb["knowledge_id"] for kb in content["knowledge_bases"]]
            assert event["knowledge_ids"] == listed and ACL_KB in listed


async def test_each_route_records_exactly_what_it_returned(
    audited: tuple[httpx.AsyncClient, str],
) -> None:
    c, alias = audited
    who = {"user_id": "wang", "user_roles": ["物业经理"]}
    calls = {
        "/retrieval": {
            "knowledge_id": ACL_KB,
            "query": "消防演练",
            "retrieval_setting": {"top_k": 5},
            "metadata_condition": {
                "conditions": [
                    {"name": "user_id", "comparison_operator": "is", "value": "wang"},
                    {"name": "user_roles", "comparison_operator": "in", "value": ["物业经理"]},
                ]
            },
        },
        "/v1/search": {
            "query": "消防演练",
            "knowledge_ids": [ACL_KB, SAMPLES_KB],
            "principal": {"user_id": "wang", "roles": ["物业经理"]},
        },
        "/v1/tools/unified-search": {"query": "消防演练", "knowledge_ids": ACL_KB, **who},
        "/mcp": rpc("tools/call", {"name": "search", "arguments": {
            "query": "消防演练", "knowledge_ids": [ACL_KB]}}),
    }  # fmt: skip
    returned = {}
    for route, body in calls.items():
        request_id = uuid.uuid4().hex
        headers = {**auth("anon"), "X-Request-ID": request_id}
        if route == "/mcp":  # identity from the application's headers, never from arguments
            headers |= {**MCP_HEADERS, "X-Rsvc-User": "wang", "X-Rsvc-Roles": quote("物业经理")}
        resp = await c.post(route, json=body, headers=headers)
        assert resp.status_code == 200, resp.text
        returned[request_id] = (route, chunk_ids(route, resp.json()))
        assert returned[request_id][1], route
    await written(c, len(calls))
    recorded = await events(alias)
    for request_id, (route, ids) in returned.items():
        event = recorded[request_id]
        assert event["route"] == route and event["chunks"] == ids, (route, event)
        assert event["tenant"] == TENANT and event["key"] == "anon"
        assert event["actor"] == "key:anon"  # the key acted; wang is the subject
        assert event["user"] == user_token("wang", "hash", HASH_KEY.encode()) != "wang"
        assert event["roles"] == 1 and event["documents"]  # (the count, never the names)
        assert "query" not in event  # unless RSVC_AUDIT_QUERIES
    # Who retrieved this document? The CLI asks the trail.
    document = next(iter(recorded.values()))["documents"][0]
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias,  # (no API key needed to read)
           "RSVC_AUDIT": "elasticsearch", "RSVC_AUDIT_USER": "hash",
           "RSVC_AUDIT_HASH_KEY": HASH_KEY}  # fmt: skip
    result = await asyncio.to_thread(
        CliRunner().invoke,
        svc_cli,
        ["audit", "search", "--user", "wang", "--document", document, "--since", "1h", "--json"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {e["request_id"] for e in lines} == set(returned)
    # The document's title beside its id (issue #36 §3), and recent events with no filter.
    title = await chunk_title(alias, document)
    assert all(e["document_titles"][document] == title for e in lines), lines[0]
    listed = await asyncio.to_thread(
        CliRunner().invoke, svc_cli, ["audit", "search", "--since", "1h"], env=env
    )
    assert listed.exit_code == 0 and f"{title} ({document})" in listed.stderr + listed.stdout
    pages = [
        await asyncio.to_thread(
            CliRunner().invoke,
            svc_cli,
            ["audit", "search", "--since", "1h", "--limit", "2", "--page", str(n), "--json"],
            env=env,
        )
        for n in (1, 2)
    ]
    ids = [[json.loads(line)["request_id"] for line in p.stdout.splitlines()] for p in pages]
    assert len(ids[0]) == 2 and ids[1] and not set(ids[0]) & set(ids[1]), ids  # newest first


async def test_the_log_sink_writes_a_line(corpus: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rsvc.audit")
    settings = make_settings(corpus, audit="log", audit_queries=True)
    async with app_client(settings) as c:
        resp = await c.post(
            "/v1/search",
            json={"query": "巡更", "knowledge_ids": [SAMPLES_KB]},
            headers=auth("anon"),
        )
    (record,) = [r for r in caplog.records if r.name == "rsvc.audit"]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["chunks"] == [m["chunk_id"] for m in resp.json()["chunk_metadata"]]
    assert fields["query"] == "巡更" and fields["route"] == "/v1/search"


async def test_a_refusing_cluster_or_a_full_queue_never_fails_a_request(corpus: str) -> None:
    es = AsyncElasticsearch(ES_URL)
    today = datetime.now(UTC).date()
    blocked = audit_index(corpus, TENANT, today)
    await es.indices.create(index=blocked)
    await es.indices.close(index=blocked)  # the cluster refuses every write to today's index
    settings = make_settings(corpus, audit="elasticsearch", audit_queue_size=3)
    body = {"query": "巡更", "knowledge_ids": [SAMPLES_KB]}
    try:
        async with app_client(settings) as c:
            answers = await asyncio.gather(
                *(c.post("/v1/search", json=body, headers=auth("anon")) for _ in range(40))
            )
            assert all(a.status_code == 200 for a in answers)
            deadline = time.monotonic() + 60
            while events_counted(c, "failed") == 0:
                assert time.monotonic() < deadline, "failed writes were not counted"
                await asyncio.sleep(0.1)
            assert events_counted(c, "dropped") > 0
            await es.indices.open(index=blocked)  # the cluster takes writes again
            before = events_counted(c, "written")
            assert (await c.post("/v1/search", json=body, headers=auth("anon"))).status_code == 200
            await written(c, int(before) + 1)
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(corpus)}*")
        await es.close()


async def test_retention_deletes_old_indices_only(corpus: str) -> None:
    from retrieval_svc.audit import Audit
    from retrieval_svc.metrics import Metrics

    es = AsyncElasticsearch(ES_URL)
    settings = make_settings(corpus, audit="elasticsearch", audit_retention_days=30)
    audit = Audit(settings, es, Metrics())
    today = datetime.now(UTC).date()
    days = {"old": today - timedelta(days=31), "edge": today - timedelta(days=30), "new": today}
    try:
        await audit.put_template()
        for day in days.values():
            await es.indices.create(index=audit_index(corpus, TENANT, day))
        deleted = await audit.apply_retention(today)
        assert deleted == [audit_index(corpus, TENANT, days["old"])]
        for name in ("edge", "new"):
            assert await es.indices.exists(index=audit_index(corpus, TENANT, days[name]))
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(corpus)}*")
        await es.close()


async def test_the_ids_that_named_no_one_outlive_a_restart(corpus: str) -> None:
    """Issue #58 §2: the console's list of unknown ids comes from the audit trail too, so
    after a restart (or on another replica) the operator still sees who was served
    public-only."""
    from retrieval_svc.console.policy_page import _unknown_users

    stranger = f"stranger-{uuid.uuid4().hex[:6]}@corp.example"
    settings = make_settings(
        corpus, audit="elasticsearch", api_keys=[key_entry("anon", tenant=TENANT, mode="trusted")]
    )
    body = {"query": "巡更", "knowledge_ids": [SAMPLES_KB], "principal": {"user_id": stranger}}
    try:
        async with app_client(settings) as c:
            answer = await c.post("/v1/search", json=body, headers=auth("anon"))
            assert answer.status_code == 200
            await written(c, 1)
        async with app_client(settings) as c:  # (a new process: nothing seen in it yet)
            state = c._transport.app.state.rsvc  # type: ignore[attr-defined]
            assert state.unknown_users.recent(TENANT) == []
            deadline = time.monotonic() + 60
            while not (listed := await _unknown_users(state, TENANT)):
                assert time.monotonic() < deadline, "the trail's unknown ids were not listed"
                await asyncio.sleep(0.2)
            assert [(s.asked, s.status, s.key, s.count) for s in listed] == [
                (stranger, "unknown", "anon", 1)
            ]
    finally:
        es = AsyncElasticsearch(ES_URL)
        await es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(corpus)}*")
        await es.close()
