"""The lease enforced by Elasticsearch where a write can carry a version (``indexer.lease``
``Lease.version``): a holder frozen between its lease check and its request, whose write
lands after its successor's, is refused — chunks written (or deleted) by a later holding are
never overwritten by an earlier one. Against the real Elasticsearch."""

from __future__ import annotations

from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from indexer.lease import Lease
from indexer.report import Report
from indexer.store import delete_ids
from indexer.watch.settle import hold_documents
from indexer.writing import _bulk
from retrieval_svc.search.index import ensure_index
from retrieval_svc.tenancy import tenant_alias
from tests.support.corpus import TENANT

pytestmark = pytest.mark.anyio


def chunk(doc: str, roles: list[str], text: str) -> dict[str, Any]:
    return {"chunk_id": f"{doc}-1", "document_id": doc, "knowledge_id": "kb",
            "tenant": TENANT, "access_roles": roles, "content": text}  # fmt: skip


async def roles_of(es: AsyncElasticsearch, index: str, chunk_id: str) -> list[str] | None:
    found = await es.options(ignore_status=404).get(index=index, id=chunk_id)
    return found["_source"]["access_roles"] if found.body.get("found") else None


async def test_an_earlier_holder_s_late_write_is_refused(
    es: AsyncElasticsearch, alias: str
) -> None:
    await ensure_index(es, alias, tenant=TENANT)
    index = tenant_alias(alias, TENANT)
    runs = f"{alias}-runs.fence-test"
    first = Lease(es, runs, "kb", "/srv/share", ttl_s=60.0, name="first")
    assert await first.acquire(wait_s=30)
    report = Report(source="/srv/share", knowledge_id="kb")
    assert not await _bulk(es, index, {"gone": [chunk("gone", [], "v1")]}, report, first.version)
    # The first holder is frozen; the second takes the source over (here: given up).
    await first.release()
    second = Lease(es, runs, "kb", "/srv/share", ttl_s=60.0, name="second")
    assert await second.acquire(wait_s=30)
    assert second.number > first.number
    assert not await _bulk(es, index, {"d": [chunk("d", ["法务"], "v2")]}, report, second.version)
    assert await delete_ids(es, index, ["gone-1"], second.version) == 1

    # The first holder wakes and its writes land: refused, both over a newer write and over
    # a newer deletion.
    late = {"d": [chunk("d", [], "v1")], "gone": [chunk("gone", [], "v1")]}
    assert await _bulk(es, index, late, report, first.version) == {"d", "gone"}
    assert await roles_of(es, index, "d-1") == ["法务"]
    assert await roles_of(es, index, "gone-1") is None

    # A holder's own writes after its holds still land (a hold moves its count on).
    await es.indices.refresh(index=index)
    for _ in range(3):
        assert await hold_documents(es, index, ["d"], second.version) == 1
    assert await roles_of(es, index, "d-1") == ["user:"]
    again = {"d": [chunk("d", ["人事"], "v3")]}
    assert not await _bulk(es, index, again, report, second.version)
    assert await roles_of(es, index, "d-1") == ["人事"]
