"""The lease enforced by Elasticsearch where a write can carry a version (``indexer.lease``
``Lease.version``): a holder frozen between its lease check and its request, whose write
lands after its successor's, is refused — chunks written (or deleted) by a later holding are
never overwritten by an earlier one. Against the real Elasticsearch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from indexer.lease import Lease
from indexer.report import Report
from indexer.store import delete_ids
from indexer.watch.hold import hold_actions, hold_documents, write_holds
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


async def two_holders(es: AsyncElasticsearch, alias: str, source: str) -> tuple[Lease, Lease]:
    """A holder that wrote and froze, and the one that took the source over after it."""
    runs = f"{alias}-runs.fence-test"
    first = Lease(es, runs, "kb", source, ttl_s=60.0, name="first")
    assert await first.acquire(wait_s=30)
    await first.release()
    second = Lease(es, runs, "kb", source, ttl_s=60.0, name="second")
    assert await second.acquire(wait_s=30)
    assert second.number > first.number
    return first, second


async def replay(actions: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for action in actions:
        yield action


async def test_an_earlier_holder_s_late_write_over_a_held_chunk_is_refused(
    es: AsyncElasticsearch, alias: str
) -> None:
    await ensure_index(es, alias, tenant=TENANT)
    index = tenant_alias(alias, TENANT)
    first, second = await two_holders(es, alias, "/srv/held")
    report = Report(source="/srv/held", knowledge_id="kb")
    # The first holder wrote the document for 法务 only, then froze; the source now says
    # everyone may read it, and the second holder holds it while it reads it again.
    assert not await _bulk(es, index, {"h": [chunk("h", ["法务"], "v1")]}, report, first.version)
    await es.indices.refresh(index=index)
    assert await hold_documents(es, index, ["h"], second.version) == 1
    held = (await es.get(index=index, id="h-1"))["_source"]
    assert held == chunk("h", ["user:"], "v1")  # (the chunk as stored, only its roles held)
    # The first holder wakes, its write of what it read earlier lands: refused, still held.
    late = {"h": [chunk("h", [], "v0")]}
    assert await _bulk(es, index, late, report, first.version) == {"h"}
    assert await roles_of(es, index, "h-1") == ["user:"]
    # Held again by the same holding: left as it is, still fenced.
    await es.indices.refresh(index=index)
    assert await hold_documents(es, index, ["h"], second.version) == 0
    assert await _bulk(es, index, late, report, first.version) == {"h"}
    assert await roles_of(es, index, "h-1") == ["user:"]


async def test_a_chunk_deleted_between_the_read_and_the_hold_does_not_come_back(
    es: AsyncElasticsearch, alias: str
) -> None:
    await ensure_index(es, alias, tenant=TENANT)
    index = tenant_alias(alias, TENANT)
    first, second = await two_holders(es, alias, "/srv/gone")
    report = Report(source="/srv/gone", knowledge_id="kb")
    assert not await _bulk(es, index, {"g": [chunk("g", [], "v1")]}, report, first.version)
    await es.indices.refresh(index=index)
    read = [a async for a in hold_actions(es, index, ["g"], second.version())]
    assert len(read) == 1
    # The first holder's late deletion lands between the second's read and its hold.
    assert await delete_ids(es, index, ["g-1"], first.version) == 1
    assert await write_holds(es, replay(read), second.version) == 0
    assert await roles_of(es, index, "g-1") is None
    # And the first holder's late write of it after that is refused too.
    assert await _bulk(es, index, {"g": [chunk("g", [], "v1")]}, report, first.version) == {"g"}
    assert await roles_of(es, index, "g-1") is None


async def test_a_write_since_the_read_is_kept_not_overwritten_by_the_hold(
    es: AsyncElasticsearch, alias: str
) -> None:
    await ensure_index(es, alias, tenant=TENANT)
    index = tenant_alias(alias, TENANT)
    _first, second = await two_holders(es, alias, "/srv/newer")
    report = Report(source="/srv/newer", knowledge_id="kb")
    assert not await _bulk(es, index, {"n": [chunk("n", ["法务"], "v1")]}, report, second.version)
    await es.indices.refresh(index=index)
    read = [a async for a in hold_actions(es, index, ["n"], second.version())]
    # The holder itself writes the document again after the hold read it.
    assert not await _bulk(es, index, {"n": [chunk("n", ["人事"], "v2")]}, report, second.version)
    assert await write_holds(es, replay(read), second.version) == 0
    found = await es.get(index=index, id="n-1")
    assert (found["_source"]["access_roles"], found["_source"]["content"]) == (["人事"], "v2")


@pytest.mark.parametrize("between", ["deleted", "written"])
async def test_without_a_lease_a_hold_writes_only_the_chunk_it_read(
    es: AsyncElasticsearch, alias: str, between: str
) -> None:
    await ensure_index(es, alias, tenant=TENANT)
    index = tenant_alias(alias, TENANT)
    doc = f"free-{between}"
    report = Report(source="/srv/free", knowledge_id="kb")
    assert not await _bulk(es, index, {doc: [chunk(doc, ["法务"], "v1")]}, report)
    await es.indices.refresh(index=index)
    read = [a async for a in hold_actions(es, index, [doc], None)]
    if between == "deleted":
        assert await delete_ids(es, index, [f"{doc}-1"]) == 1
        expected = None
    else:
        assert not await _bulk(es, index, {doc: [chunk(doc, ["人事"], "v2")]}, report)
        expected = ["人事"]
    assert await write_holds(es, replay(read)) == 0
    assert await roles_of(es, index, f"{doc}-1") == expected
    # With nothing in between, the hold lands.
    await es.indices.refresh(index=index)
    assert await hold_documents(es, index, [doc]) == (0 if expected is None else 1)
    assert await roles_of(es, index, f"{doc}-1") == (None if expected is None else ["user:"])
