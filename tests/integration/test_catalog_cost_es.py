"""The visible-field catalog costs no search of its own (issue #38): once a tenant is warm,
200 filtered searches, each from a role set never seen before, send 200 searches' worth of
requests to Elasticsearch — plus at most the catalog's own refreshes — and still answer a
field only hidden chunks have exactly as one that exists nowhere (design.md §4)."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.app import create_app
from retrieval_svc.auth.keys import IdentityMode
from retrieval_svc.search.catalog import MAX_AGE_S
from tests.support import app_client, auth, key_entry, make_settings
from tests.support.corpus import TENANT, store_chunks

pytestmark = pytest.mark.anyio

KB = "catalog-cost-kb"
DOCS = {
    "cc-public": {"content": "冷却塔 巡检 记录", "metadata": {"area": "屋面"}},
    "cc-ops": {
        "content": "冷却塔 巡检 参数",
        "access_roles": ["运维工程师", "cc-role-7"],
        "metadata": {"area": "屋面", "pump_model": "KQL-200"},
    },
}


@pytest.fixture(scope="module")
def cost_kb(corpus: str, es_sync: Elasticsearch) -> str:
    store_chunks(es_sync, corpus, KB, DOCS)
    return corpus


def kind(path: str, body: Any) -> str:
    """What a request to Elasticsearch was for: the catalog's refresh, a mapping, a search."""
    text = json.dumps(body, ensure_ascii=False) if body is not None else ""
    if '"composite"' in text:
        return "catalog-refresh"
    if path.endswith("/_mapping"):
        return "mapping"
    return "search" if path.endswith(("/_search", "/_msearch")) else path


async def test_new_role_sets_cost_no_extra_request(cost_kb: str) -> None:
    trusted = key_entry("anon", tenant=TENANT, mode=IdentityMode.TRUSTED)
    app = create_app(make_settings(cost_kb, api_keys=[trusted]))
    sent: Counter[str] = Counter()
    async with app_client(app) as c:
        transport = app.state.rsvc.es.transport
        perform = transport.perform_request

        async def counted(method: str, path: str, **kwargs: Any) -> Any:
            sent[kind(path, kwargs.get("body"))] += 1
            return await perform(method, path, **kwargs)

        transport.perform_request = counted  # the real client, every request it sends counted

        def body(i: int, flt: dict[str, Any]) -> dict[str, Any]:
            roles = [f"cold-{i}-{j}" for j in range(1 + i % 5)] + (["cc-role-7"] if i % 3 else [])
            return {"query": "冷却塔", "knowledge_ids": [KB], "filter": flt,
                    "principal": {"roles": roles}}  # fmt: skip

        async def search(request: dict[str, Any]) -> Any:
            return await c.post("/v1/search", json=request, headers=auth("anon"))

        warm = await search(body(-1, {"field": "area", "op": "eq", "value": "屋面"}))
        assert warm.status_code == 200, warm.text
        refreshes, started = app.state.rsvc.catalog.refreshes, time.monotonic()
        sent.clear()
        seen = {"with": 0, "without": 0}
        for i in range(200):
            flt = {"field": "pump_model" if i % 3 else "area", "op": "exists"}
            resp = await search(body(i, flt))
            assert resp.status_code == 200, resp.text
            ids = {chunk["chunk_id"] for chunk in resp.json()["chunk_metadata"]}
            assert ("cc-ops" in ids) == bool(i % 3), (i, ids)  # a role set that sees it gets it
            seen["with" if i % 3 else "without"] += 1
        took = time.monotonic() - started
        # Without cc-role-7 the field pump_model is hidden: it answers as one that is nowhere.
        outsider = {"principal": {"roles": ["cold-x"]}}
        hidden = await search({**body(0, {"field": "pump_model", "op": "exists"}), **outsider})
        nowhere = await search({**body(0, {"field": "no_such_field", "op": "exists"}), **outsider})
    assert hidden.status_code == nowhere.status_code == 400
    assert hidden.json()["error_msg"].replace("pump_model", "X") == nowhere.json()[
        "error_msg"
    ].replace("no_such_field", "X")
    refreshed = app.state.rsvc.catalog.refreshes - refreshes
    assert refreshed <= 1 + int(took // MAX_AGE_S), (refreshed, took)  # only by age, if at all
    assert sent["search"] == 200, sent
    assert set(sent) <= {"search", "catalog-refresh", "mapping"}, sent
    assert sent["catalog-refresh"] <= refreshed and sent["mapping"] <= 1 + int(took // MAX_AGE_S)
    assert seen["with"] and seen["without"]
