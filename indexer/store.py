"""The indexer's reads and writes of a tenant's index: a knowledge base's chunks, the
versions stored, stale and pruned documents, refreshes that ride out a lost node."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elasticsearch import ApiError, AsyncElasticsearch
from elasticsearch.helpers import async_bulk, async_scan

from indexer.shards import Shard
from retrieval_svc.acl import tenant_query
from retrieval_svc.words import say

log = logging.getLogger(__name__)

# A role no principal can hold: the user-name prefix alone (a role a caller asserts, a grant,
# an OIDC group or a document's metadata can never be ``user:…``). The watcher holds a changed
# document's chunks with it — they answer no one — until it is read again.
HELD_ROLE = "user:"


def kb_query(tenant: str, knowledge_id: str, *more: dict[str, Any]) -> dict[str, Any]:
    """The chunks of one tenant's knowledge base (and ``more`` clauses)."""
    return {
        "bool": {"filter": [tenant_query(tenant), {"term": {"knowledge_id": knowledge_id}}, *more]}
    }


@dataclass(frozen=True, slots=True)
class Stored:
    """What the index holds of one document: the ETags and permission versions its chunks
    carry (a clean document has one of each) and how many chunks it has."""

    etags: frozenset[str]
    versions: frozenset[str]
    chunks: int
    last: int = 0  # the highest segment_position stored (a run killed mid-way may leave gaps)
    # The document's own chunk count, as each chunk carries it (lowest and highest seen;
    # None: written before chunks carried it).
    counts: tuple[int, int] | None = None
    # The sources its chunks were written from ("" for chunks written before sources were
    # recorded: any source of the knowledge base may take those over).
    sources: frozenset[str] = frozenset()
    held: bool = False  # some chunk is held (HELD_ROLE): never skipped until written again

    def needs(self, etag: str, version: str, force: bool = False) -> str:
        """What a run does with this document listed with ``etag`` and permissions
        ``version``: ``skip`` (the same bytes under the same permission sources, all chunks
        stored), ``retag`` (the same bytes, other roles: re-tagged in place, not re-embedded)
        or ``write``."""
        if force or self.etags != {etag} or not self.complete:
            return "write"  # (cut short by a killed run: written again)
        return "skip" if self.versions == {version} and not self.held else "retag"

    def written_by_another(self, source: str) -> str | None:
        """The other source this document was written from, if not ``source``."""
        others = sorted(self.sources - {source, ""})
        return others[0] if others else None

    @property
    def complete(self) -> bool:
        """Every chunk the document has is stored: a run killed between two bulk requests of
        one document leaves fewer, all with the current ETag. (Chunks written before they
        carried their count are taken as complete, as they were then.)"""
        if self.counts is None:
            return True
        low, high = self.counts
        return low == high == self.chunks


async def current_versions(
    es: AsyncElasticsearch, alias: str, tenant: str, knowledge_id: str, doc_ids: list[str]
) -> dict[str, Stored]:
    """What is stored of each of ``doc_ids`` that has chunks."""

    def keys(field: str) -> dict[str, Any]:
        return {"terms": {"field": field, "size": 3, "missing": ""}}

    response = await es.search(
        index=alias,
        size=0,
        query=kb_query(tenant, knowledge_id, {"terms": {"document_id": doc_ids}}),
        aggs={
            "docs": {
                "terms": {"field": "document_id", "size": len(doc_ids)},
                "aggs": {
                    "etags": keys("source_etag"),
                    "versions": keys("permissions_version"),
                    "last": {"max": {"field": "segment_position"}},
                    "count_low": {"min": {"field": "segment_count"}},
                    "count_high": {"max": {"field": "segment_count"}},
                    "sources": keys("source_name"),
                    "held": {"filter": {"term": {"access_roles": HELD_ROLE}}},
                },
            }
        },
    )
    return {
        bucket["key"]: Stored(
            etags=frozenset(e["key"] for e in bucket["etags"]["buckets"]),
            versions=frozenset(v["key"] for v in bucket["versions"]["buckets"]),
            chunks=int(bucket["doc_count"]),
            last=int(bucket["last"]["value"] or 0),
            counts=_counts(bucket),
            sources=frozenset(v["key"] for v in bucket["sources"]["buckets"]),
            held=bool(bucket["held"]["doc_count"]),
        )
        for bucket in response["aggregations"]["docs"]["buckets"]
    }


def _counts(bucket: dict[str, Any]) -> tuple[int, int] | None:
    low, high = bucket["count_low"]["value"], bucket["count_high"]["value"]
    return None if low is None or high is None else (int(low), int(high))


def versioned(stamp: Callable[[], int] | None) -> dict[str, Any]:
    """What a bulk action carries so that Elasticsearch refuses it over a newer holder's
    write of the same chunk (``IndexOptions.stamp``); nothing without a stamp."""
    if stamp is None:
        return {}
    return {"version": stamp(), "version_type": "external_gte"}


async def delete_matching(
    es: AsyncElasticsearch,
    alias: str,
    query: dict[str, Any],
    stamp: Callable[[], int] | None = None,
) -> int:
    """Delete every chunk matching ``query`` (scan + bulk: no optional ES module needed)."""
    deleted = 0
    batch: list[dict[str, Any]] = []
    fence = versioned(stamp)
    async for hit in async_scan(es, index=alias, query={"query": query}, _source=False, size=1000):
        batch.append({"_op_type": "delete", "_index": hit["_index"], "_id": hit["_id"], **fence})
        if len(batch) >= 1000:
            deleted += (await async_bulk(es, batch, raise_on_error=False))[0]
            batch = []
    if batch:
        deleted += (await async_bulk(es, batch, raise_on_error=False))[0]
    return deleted


async def delete_ids(
    es: AsyncElasticsearch, alias: str, ids: list[str], stamp: Callable[[], int] | None = None
) -> int:
    """Delete the chunks ``ids`` (those that exist); how many went. By id, so no refresh
    and no search is needed first."""
    deleted = 0
    fence = versioned(stamp)
    for i in range(0, len(ids), 1000):
        actions = [
            {"_op_type": "delete", "_index": alias, "_id": d, **fence} for d in ids[i : i + 1000]
        ]
        deleted += (await async_bulk(es, actions, raise_on_error=False))[0]
    return deleted


async def refresh(es: AsyncElasticsearch, index: str, attempts: int = 20) -> None:
    """Refresh ``index``, riding out a node that was just lost.

    Right after a node dies, a refresh still addresses its shard copies and fails with 503
    until the cluster has noticed (seconds); the chunks are written on the surviving copies.
    Each retry waits a second; after ``attempts`` the error is raised.
    """
    for attempt in range(attempts):
        try:
            await es.indices.refresh(index=index)
            return
        except ApiError as exc:
            if exc.meta.status != 503 or attempt == attempts - 1:
                raise
            log.warning(say("refresh_retrying", index=index))
            await asyncio.sleep(1.0)


async def withdraw(
    es: AsyncElasticsearch,
    alias: str,
    tenant: str,
    knowledge_id: str,
    document_ids: list[str],
    stamp: Callable[[], int] | None = None,
) -> None:
    """Delete every chunk of ``document_ids`` (failed documents whose older chunks may be
    wider than their source now says)."""
    for i in range(0, len(document_ids), 500):
        part = document_ids[i : i + 500]
        await delete_matching(
            es, alias, kb_query(tenant, knowledge_id, {"terms": {"document_id": part}}), stamp
        )


def of_source(source: str, location: str) -> dict[str, Any]:
    """The chunks written from ``source``, and those written before chunks recorded their
    source whose address lies in the source's ``location``."""
    legacy = {
        "bool": {
            "must_not": {"exists": {"field": "source_name"}},
            "filter": {"prefix": {"source_file_url": location}},
        }
    }
    return {
        "bool": {
            "should": [{"term": {"source_name": source}}, legacy],
            "minimum_should_match": 1,
        }
    }


async def documents_below(
    es: AsyncElasticsearch,
    alias: str,
    tenant: str,
    knowledge_id: str,
    source: tuple[str, str] | None,
    names: list[dict[str, Any]],
) -> dict[str, str]:
    """The documents of ``source`` (its name and location; None: of every source) whose
    names match any of ``names`` (term or prefix clauses on ``document_name``): document id
    → name."""
    found: dict[str, str] = {}
    mine = [of_source(*source)] if source is not None else []
    query = kb_query(
        tenant,
        knowledge_id,
        *mine,
        {"bool": {"should": names, "minimum_should_match": 1}},
    )
    async for hit in async_scan(
        es, index=alias, query={"query": query}, _source=["document_id", "document_name"]
    ):
        found[hit["_source"]["document_id"]] = hit["_source"].get("document_name", "")
    return found


async def sources_of(
    es: AsyncElasticsearch, alias: str, tenant: str, knowledge_id: str
) -> dict[str, int]:
    """The sources a knowledge base's documents were written from, with their document
    counts ("" for documents written before sources were recorded)."""
    response = await es.options(ignore_status=404).search(
        index=alias,
        size=0,
        query=kb_query(tenant, knowledge_id),
        aggs={
            "sources": {
                "terms": {"field": "source_name", "size": 100, "missing": ""},
                "aggs": {"documents": {"cardinality": {"field": "document_id"}}},
            }
        },
    )
    buckets = response.get("aggregations", {}).get("sources", {}).get("buckets", [])
    return {b["key"]: int(b["documents"]["value"]) for b in buckets}


async def prune(
    es: AsyncElasticsearch,
    alias: str,
    tenant: str,
    knowledge_id: str,
    keep: set[str],
    shard: Shard | None = None,
    source: tuple[str, str] | None = None,
    stamp: Callable[[], int] | None = None,
) -> int:
    """Delete the documents of ``tenant``'s ``knowledge_id`` not in ``keep`` (of ``shard``
    only: a shard never prunes another's documents; of ``source`` — its name and location —
    only: a source never prunes another's); how many."""
    gone: list[str] = []
    after: dict[str, Any] | None = None
    while True:
        composite: dict[str, Any] = {
            "size": 1000,
            "sources": [{"doc": {"terms": {"field": "document_id"}}}],
        }
        if after:
            composite["after"] = after
        mine = [of_source(*source)] if source is not None else []
        response = await es.search(
            index=alias,
            size=0,
            query=kb_query(tenant, knowledge_id, *mine),
            aggs={"docs": {"composite": composite}},
        )
        agg = response["aggregations"]["docs"]
        gone += [
            doc
            for b in agg["buckets"]
            if (doc := b["key"]["doc"]) not in keep and (shard is None or shard.holds(doc))
        ]
        after = agg.get("after_key")
        if not after or not agg["buckets"]:
            break
    for i in range(0, len(gone), 500):
        part = gone[i : i + 500]
        await delete_matching(
            es, alias, kb_query(tenant, knowledge_id, {"terms": {"document_id": part}}), stamp
        )
    return len(gone)
