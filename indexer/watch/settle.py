"""One batch of keys (or the whole source) brought in line with the source, narrowing first.

1. **Look.** Each key as the source holds it now (a folder key: every object below it), or the
   whole listing for a re-listing; each compared with what the index holds, as a run compares
   (``Stored.needs``).
2. **Narrow.** A document gone from the source (deleted, moved away, now a link, now excluded)
   is deleted at once; a document whose bytes or permission sources changed is *held* at once:
   its chunks' ``access_roles`` become ``HELD_ROLE``, a role no principal can hold, so they
   answer no one while it is read again. One refresh, and both are in force — before anything
   is parsed or embedded.
3. **Index.** The changed and new objects go through ``index_source``, the pipeline ``index``
   runs: a held document is written (or re-tagged, its vectors kept) with its new roles, or,
   when it now fails, withdrawn. Nothing is skipped that was held.

A re-listing whose listing could not complete prunes nothing (what it did not reach is
unknown, not gone), and withdraws what lies below a folder it could not read, as ``index``
does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from elasticsearch import AsyncElasticsearch

from indexer.documents import DocumentError, document_id
from indexer.loading import IndexOptions, guarded, outside_of
from indexer.passing_over import PassedOver
from indexer.pipeline import Progress, index_source
from indexer.report import Report
from indexer.sources import ListingFailure, ObjectRef, Source
from indexer.store import (
    current_versions,
    documents_below,
    kb_query,
    of_source,
    refresh,
    withdraw,
)
from indexer.unlisted import still_held
from indexer.watch.hold import hold_documents
from indexer.workers import ParserPool
from indexer.writing import Fence, fencing
from retrieval_svc.embedding import Embedder

BATCH = 500  # objects compared with the index at once


@dataclass(slots=True)
class Settled:
    """What one settle did: documents deleted and held at once (and when that was in force),
    and the pipeline's report for the rest."""

    looked: int = 0
    deleted: int = 0
    held: int = 0
    narrowed_at: float = 0.0  # time.time() when the deletions and holds were in force
    report: Report | None = None
    failures: list[ListingFailure] = field(default_factory=list)
    listed_s: float = 0.0  # the listing and comparison (a re-listing's cost)
    keys: list[str] = field(default_factory=list)  # held from the index: to read again

    @property
    def ok(self) -> bool:
        return (self.report is None or self.report.ok) and not self.failures


class _Chosen:
    """The objects a settle decided to index, as a ``Source`` for the pipeline (reads go to
    the real source)."""

    def __init__(self, source: Source, refs: list[ObjectRef]) -> None:
        self._source, self._refs = source, refs
        self.description = source.description
        self.location = source.location
        self.passed_over = PassedOver()
        self.failures: list[ListingFailure] = []

    def list(self) -> Iterator[ObjectRef]:
        return iter(self._refs)

    def look(self, key: str) -> ObjectRef | None:
        return self._source.look(key)

    def under(self, folder: str) -> Iterator[ObjectRef]:
        return self._source.under(folder)

    def read(self, ref: ObjectRef) -> bytes:
        return self._source.read(ref)

    def sidecar(self, ref: ObjectRef) -> dict[str, Any]:
        return self._source.sidecar(ref)

    def tags(self, ref: ObjectRef) -> dict[str, str]:
        return self._source.tags(ref)


def mine(options: IndexOptions, doc_id: str) -> bool:
    return options.shard is None or options.shard.holds(doc_id)


async def _look(
    source: Source, keys: Iterable[str]
) -> tuple[dict[str, ObjectRef], list[dict[str, Any]]]:
    """The objects at ``keys`` now (a key that is a folder: those below it), and the name
    clauses that find what the index holds at those keys."""
    import asyncio

    found: dict[str, ObjectRef] = {}
    names: list[dict[str, Any]] = []
    for key in sorted(set(keys)):
        names.append({"term": {"document_name": key}})
        names.append({"prefix": {"document_name": key.rstrip("/") + "/"}})
        ref = await asyncio.to_thread(source.look, key)
        if ref is not None:
            found[ref.key] = ref
        for below in await asyncio.to_thread(_under, source, key):
            found[below.key] = below
    return found, names


def _under(source: Source, key: str) -> list[ObjectRef]:
    return list(source.under(key))


async def stored_ids(
    es: AsyncElasticsearch, options: IndexOptions, source: Source, names: list[dict[str, Any]]
) -> dict[str, str]:
    """This source's stored documents matching ``names`` (all of them for none): id → name.
    A source that is the knowledge base's only one (``--prune``): every source's."""
    mine = None if options.sole else (options.source_name, source.location)
    if names:
        return await documents_below(
            es, options.alias, options.tenant, options.knowledge_id, mine, names
        )
    found: dict[str, str] = {}
    query = kb_query(options.tenant, options.knowledge_id, *([of_source(*mine)] if mine else []))
    after: dict[str, Any] | None = None
    while True:  # (a document a bucket, not a chunk a hit: a re-listing reads documents)
        composite: dict[str, Any] = {
            "size": 2000,
            "sources": [
                {"id": {"terms": {"field": "document_id"}}},
                {"name": {"terms": {"field": "document_name", "missing_bucket": True}}},
            ],
        }
        if after:
            composite["after"] = after
        response = await es.options(ignore_status=404).search(
            index=options.alias, size=0, query=query, aggs={"docs": {"composite": composite}}
        )
        agg = (response.body.get("aggregations") or {}).get("docs")
        if not agg:  # (no index yet: nothing stored)
            return found
        for bucket in agg["buckets"]:
            found[bucket["key"]["id"]] = bucket["key"]["name"] or ""
        after = agg.get("after_key")
        if not after or not agg["buckets"]:
            return found


@dataclass(slots=True)
class Plan:
    """A settle's narrowing done, its indexing to do: ``finish`` runs it."""

    source: Source
    options: IndexOptions
    done: Settled
    write: list[ObjectRef]
    gone: int = 0
    below: int = 0
    # What its indexing will write of each document: its ETag and permissions version (so a
    # narrowing while it runs leaves alone what it will write right).
    planned: dict[str, tuple[str, str]] = field(default_factory=dict)


async def settle(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    keys: Iterable[str] | None,
    *,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    pool: ParserPool | None = None,
) -> Settled:
    """Bring ``keys`` of ``source`` (None: all of it, a re-listing) in line with the source:
    deletions and holds in force first, then the changed objects indexed."""
    plan = await narrow(es, source, options, keys)
    return await finish(es, plan, embedder=embedder, progress=progress, pool=pool)


async def narrow(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    keys: Iterable[str] | None,
    fences: Sequence[Fence] = (),
    planned: Mapping[str, tuple[str, str]] | None = None,
    spare: Mapping[str, str] | None = None,
) -> Plan:
    """Look at ``keys`` (None: everything) and put what narrows in force: the gone deleted,
    the changed held. ``fences``: of the passes running; what this narrows, and what changed
    since they read it, joins each (under its lock, so none of their writes lands after it);
    ``planned``: what they will write — a document one will write as it is now is left to it;
    ``spare``: documents this leaves alone (a re-listing's pass: what the loop settles beside
    it, which it may have written since this listed)."""
    import asyncio

    if not options.source_name:
        options = replace(options, source_name=source.description)
    kb, tenant, alias = options.knowledge_id, options.tenant, options.alias
    done = Settled()
    started = time.perf_counter()
    source.failures.clear()
    if keys is None:
        listed: dict[str, ObjectRef] = {}
        for ref in await asyncio.to_thread(lambda: list(source.list())):
            listed[ref.key] = ref
        names: list[dict[str, Any]] = []
    else:
        listed, names = await _look(source, keys)
        if not names:
            return Plan(source, options, done, [])
    refs = {
        document_id(kb, ref.identity, tenant): ref
        for ref in listed.values()
        if mine(options, document_id(kb, ref.identity, tenant))
    }
    done.looked = len(refs)
    done.failures = list(source.failures)
    stored_names = await stored_ids(es, options, source, names)
    # What the index holds of the listed objects, as a run compares them.
    write: list[ObjectRef] = []
    hold: list[str] = []
    will_write: dict[str, tuple[str, str]] = {}
    ids = list(refs)
    for i in range(0, len(ids), BATCH):
        part = ids[i : i + BATCH]
        versions = await current_versions(es, alias, tenant, kb, part)
        for doc_id in part:
            if spare and doc_id in spare:
                continue
            ref = refs[doc_id]
            stored = versions.get(doc_id)
            try:  # (tags are a request each: in a thread; rules and sidecar stamps are not)
                here = (
                    await asyncio.to_thread(outside_of, source, ref, options)
                    if options.roles_tag
                    else outside_of(source, ref, options)
                )
                version = here.version
            except DocumentError:
                version = ""  # (its roles cannot be read: the pipeline fails and withdraws it)
            if planned is not None and planned.get(doc_id) == (ref.etag, version):
                continue  # (the running pass writes it as it is now)
            need = "write" if stored is None else stored.needs(ref.etag, version, options.force)
            if need == "skip":
                continue
            other = None if stored is None else stored.written_by_another(options.source_name)
            kept_by_other = other and not options.sole and still_held(other, ref.key)
            if stored is not None and not kept_by_other:
                hold.append(doc_id)
            write.append(ref)
            will_write[doc_id] = (ref.etag, version)
    done.listed_s = time.perf_counter() - started
    # Gone: held by the index at these keys (of this source and shard), not in the source.
    unlisted_below = [f for f in source.failures if f.scope in ("folder", "key")]
    incomplete = any(f.scope == "rest" for f in source.failures)
    gone = [
        doc_id
        for doc_id, name in stored_names.items()
        if doc_id not in refs
        and mine(options, doc_id)
        and not (spare and doc_id in spare)
        and not (keys is None and incomplete)
        and not any(f.covers(name) for f in unlisted_below)
    ]
    withdraw_below = [
        doc_id
        for doc_id, name in stored_names.items()
        if any(f.covers(name) for f in unlisted_below) and mine(options, doc_id)
    ]
    # With a pass running, what changed since it read the source is fenced from it too, not
    # only what is narrowed here: a new object given a sidecar after the pass listed it (no
    # stored chunks to hold) must not be written by the pass with its older, wider roles.
    fenced = [*gone, *withdraw_below, *hold, *(will_write if fences else ())]
    if not options.dry_run and fenced:
        names_of = {**stored_names, **{i: r.key for i, r in refs.items()}}
        async with fencing(fences, {i: names_of[i] for i in fenced}):
            await guarded(options)
            if gone or withdraw_below:
                await withdraw(es, alias, tenant, kb, gone + withdraw_below, options.stamp)
            if hold:
                await hold_documents(es, alias, hold, options.stamp)
            if gone or withdraw_below or hold:
                await refresh(es, alias)
    done.deleted, done.held = len(gone) + len(withdraw_below), len(hold)
    done.narrowed_at = time.time()
    return Plan(source, options, done, write, len(gone), len(withdraw_below), will_write)


async def finish(
    es: AsyncElasticsearch,
    plan: Plan,
    *,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    pool: ParserPool | None = None,
    fence: Fence | None = None,
) -> Settled:
    """Index what ``plan`` found changed or new (``fence``: what is narrowed meanwhile is
    not written) and report the settle."""
    source, options, done = plan.source, plan.options, plan.done
    if plan.write:
        report = await index_source(
            es,
            _Chosen(source, plan.write),
            replace(options, prune=False),
            embedder=embedder,
            progress=progress,
            pool=pool,
            fence=fence,
        )
        done.report = report
    for failure in done.failures:
        if done.report is None:
            done.report = Report(source=source.description, knowledge_id=options.knowledge_id)
        done.report.fail(failure.shown, failure.reason)
    if done.report is not None:
        done.report.documents_pruned += plan.gone
        done.report.documents_withdrawn += plan.below
    return done
