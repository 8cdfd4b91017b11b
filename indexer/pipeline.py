"""Indexing a source: list → skip unchanged → read, parse, chunk → embed → bulk → drop stale.

Three stages run at once on consecutive batches: reading and parsing batch N+2, embedding
batch N+1 and writing batch N overlap (at most three batches in memory), so embedding never
waits behind Elasticsearch nor Elasticsearch behind embedding.

Work goes in batches of objects. For each batch the indexer asks Elasticsearch which
versions (``source_etag``) its documents have; a document whose every chunk carries the
object's current ETag is skipped — unless what its roles come from outside its bytes (its
folder rule, roles tag, sidecar or manifest line: ``permissions_version``) changed, when its
chunks are re-stamped from the index (``indexer.restamp``; re-read when written before chunks
kept what their bytes gave) and written back with their vectors. A changed document is
written chunk by chunk (ids are deterministic, so chunks are overwritten in place), then every
chunk of it that carries another ETag or lies past its new end is deleted. A crash between the
two steps leaves a document with mixed ETags, which the next run sees as changed and repairs; a
run killed between two bulk requests of one new document leaves fewer chunks than the count each
carries (``segment_count``), which the next run sees as incomplete and writes again: re-runs
converge.

A document that fails never keeps older, wider chunks standing: when it is in the index and
its roles can no longer be decided (its tag unreadable, its rule now refusing, its metadata
invalid) or its bytes or permission sources changed since those chunks were written, they are
withdrawn and the failure says so. Only a failure of the same bytes under the same permission
sources (a parser timeout under ``--force``) keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from elasticsearch import AsyncElasticsearch

from indexer.batch_loading import BatchLoader
from indexer.documents import document_id
from indexer.loading import IndexOptions, guarded, load_document
from indexer.permissions import Outside
from indexer.report import NOT_PRUNED, Report
from indexer.restamp import restamp_stored
from indexer.sources import ObjectRef, Source
from indexer.store import (
    Stored,
    current_versions,
    kb_query,
    prune,
    refresh,
    withdraw,
)
from indexer.unlisted import another_source, still_held, what_was_not_listed
from indexer.workers import ParserPool
from indexer.writing import Batch, EmbedProgress, Fence, embed_batch, write_batch
from retrieval_svc.embedding import Embedder

log = logging.getLogger(__name__)

__all__ = ["IndexOptions", "Progress", "index_source", "load_document"]

Progress = Callable[[str], None]
WRITE_AT_LEAST = 500  # chunks (new and re-tagged) gathered before a write, batches joined
FENCED_CHUNKS = 100  # chunks written at once under a watcher's fence (see ``_write``)


async def index_source(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    *,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    embed_progress: EmbedProgress | None = None,
    pool: ParserPool | None = None,
    fence: Fence | None = None,
) -> Report:
    """Index ``source`` into ``options.knowledge_id``; one bad document never stops the rest.

    Parsing, embedding (when ``embedder``) and writing run as overlapping stages. ``pool``:
    worker processes kept between runs (the watcher's), else the run starts its own when
    ``options.workers``; ``fence``: documents narrowed meanwhile, never written (the
    watcher's, while it narrows new events during a long pass).
    """
    run = _IndexRun(es, source, options, progress, embedder, embed_progress)
    run.loader.pool, run.fence = pool, fence
    return await run.run()


class _IndexRun:
    """One ``index_source`` call: three stages joined by one-slot queues, so a batch is
    parsed while the previous one is embedded and the one before it written.

    ``read`` lists and parses batches (skipping unchanged documents), ``embed`` adds vectors,
    and ``run`` writes; the ``Report`` is the only state they share.
    """

    def __init__(
        self,
        es: AsyncElasticsearch,
        source: Source,
        options: IndexOptions,
        progress: Progress | None,
        embedder: Embedder | None,
        embed_progress: EmbedProgress | None,
    ) -> None:
        if not options.source_name:  # (each document records the source it came from)
            options = replace(options, source_name=source.description)
        self.es, self.source, self.options = es, source, options
        self.progress = progress or (lambda _key: None)
        self.embedder, self.embed_progress = embedder, embed_progress
        self.report = Report(
            source=source.description, knowledge_id=options.knowledge_id, dry_run=options.dry_run
        )
        # Document ids in the source, kept for --prune only: a listing of a million objects
        # otherwise holds nothing per object.
        self.seen: set[str] = set()
        self._listing = iter(source.list())
        self._read: asyncio.Queue[Batch | None] = asyncio.Queue(maxsize=1)
        self._embedded: asyncio.Queue[Batch | None] = asyncio.Queue(maxsize=1)
        self.fence: Fence | None = None
        self.loader = BatchLoader(source, options)

    async def run(self) -> Report:
        started = time.perf_counter()
        es, source, options, report = self.es, self.source, self.options, self.report
        kb, alias, tenant = options.knowledge_id, options.alias, options.tenant
        # A first load into an empty knowledge base has no versions to compare with (nor does
        # a dry run for a tenant whose index does not exist yet).
        counted = await self.es.options(ignore_status=404).count(
            index=alias, query=kb_query(tenant, kb)
        )
        has_chunks = bool(counted.get("count", 0))
        async with contextlib.AsyncExitStack() as stack:
            if options.workers and self.loader.pool is None:
                self.loader.pool = await stack.enter_async_context(
                    ParserPool(options.workers, options.budget, ocr=options.ocr != "off")
                )
            await self._stages(has_chunks)
            report.parser_workers_started = (
                self.loader.pool.started if self.loader.pool is not None else 0
            )
        report.passed_over = dict(self.source.passed_over.counts)
        report.passed_over_examples = dict(self.source.passed_over.examples)
        report.fail_closed = dict(getattr(self.source, "fail_closed_count", {}))
        report.fail_closed_examples = dict(getattr(self.source, "fail_closed", {}))
        unlisted = await what_was_not_listed(es, source, options, report, has_chunks)
        if report.withdraw_ids and not options.dry_run:
            await guarded(options)
            await withdraw(self.es, alias, tenant, kb, sorted(report.withdraw_ids), options.stamp)
        report.documents_withdrawn = len(report.withdraw_ids)
        incomplete = any(f.scope == "rest" for f in source.failures)
        if incomplete and options.prune:
            report.prune_note = NOT_PRUNED
        elif options.prune and not options.dry_run:
            await guarded(options)
            report.documents_pruned = await prune(
                self.es,
                alias,
                tenant,
                kb,
                self.seen | unlisted,
                options.shard,
                None if options.sole else (options.source_name, source.location),
                options.stamp,
            )
        if not options.dry_run:
            await refresh(self.es, alias)
        report.duration_s = round(time.perf_counter() - started, 3)
        return report

    async def _stages(self, has_chunks: bool) -> None:
        """Read, embed and write, overlapping, until the listing ends."""
        stages = [asyncio.create_task(self.read(has_chunks)), asyncio.create_task(self.embed())]
        try:
            # A batch that changed a few documents is held and joined by the next ones until
            # it is worth a bulk request: a run that changed 1% of a source writes in a few
            # requests, not one per batch of the listing.
            pending: Batch | None = None
            while (batch := await self._embedded.get()) is not None:
                pending = batch if pending is None else pending.join(batch)
                if pending.chunks >= WRITE_AT_LEAST:
                    await self._write(pending)
                    pending = None
            if pending is not None:
                await self._write(pending)
            for stage in stages:
                await stage  # re-raises a stage's failure
        finally:
            for stage in stages:
                if not stage.done():
                    stage.cancel()

    async def _write(self, batch: Batch) -> None:
        options = self.options
        if self.fence is None:
            await guarded(options)
            await write_batch(
                self.es, options.alias, batch, options.dry_run, self.report, options.stamp
            )
            return
        # A few documents at a time, each under the lock (no narrowing lands between the check
        # and the write), so a narrowing waits for one small write, not a whole batch.
        for part in batch.parts(FENCED_CHUNKS):
            async with self.fence.lock:
                part = self.fence.drop(part)
                await guarded(options)
                await write_batch(
                    self.es, options.alias, part, options.dry_run, self.report, options.stamp
                )

    async def read(self, has_chunks: bool) -> None:
        """Stage 1: batches of changed documents, parsed, onto the next stage's queue."""
        options, report = self.options, self.report
        kb, tenant, name = options.knowledge_id, options.tenant, options.source_name
        try:
            while batch := await asyncio.to_thread(self._next_refs):
                ids = {ref.key: document_id(kb, ref.identity, tenant) for ref in batch}
                if options.prune:
                    self.seen.update(ids.values())
                report.documents_seen += len(batch)
                versions = (
                    await current_versions(self.es, options.alias, tenant, kb, list(ids.values()))
                    if has_chunks
                    else {}
                )
                outside = await self.loader.outside(batch)
                todo, retag = [], set()
                for ref in batch:
                    here = outside[ref.key]
                    if isinstance(here, str):  # its roles tag could not be read
                        self.progress(ref.key)
                        self._fail(ref.key, ids[ref.key], here, ids[ref.key] in versions)
                        continue
                    stored = versions.get(ids[ref.key])
                    other = None if stored is None else stored.written_by_another(name)
                    if other and not options.sole and still_held(other, ref.key):
                        self.progress(ref.key)
                        self.report.fail(ref.key, another_source(other, name))
                        continue
                    need = (
                        "write"
                        if stored is None
                        else stored.needs(ref.etag, here.version, options.force)
                    )
                    if need == "skip":
                        report.documents_skipped += 1
                        self.progress(ref.key)
                        continue
                    if need == "retag":
                        retag.add(ids[ref.key])  # the same bytes, other roles
                    todo.append(ref)
                # (the same bytes, other roles: re-stamped from the index when it can be)
                todo, restamped = await self._restamp(todo, retag, versions, outside, ids)
                docs: dict[str, list[dict[str, Any]]] = {}
                for ref, result in await self.loader.load(todo, outside):
                    self.progress(ref.key)
                    if isinstance(result, str):
                        stored = versions.get(ids[ref.key])
                        here = outside[ref.key]
                        same = (
                            stored is not None
                            and stored.etags == {ref.etag}
                            and isinstance(here, Outside)
                            and stored.versions == {here.version}
                        )
                        self._fail(ref.key, ids[ref.key], result, stored is not None and not same)
                        continue
                    report.bytes_read += ref.size
                    docs[ids[ref.key]] = result
                names = {ids[ref.key]: ref.key for ref in todo}
                retagged = {
                    d: docs.pop(d)
                    for d in [d for d in docs if d in retag]
                    if len(docs[d]) == versions[d].chunks  # (else: written whole, as changed)
                }
                existed = {d: versions[d].last for d in docs if d in versions}
                names.update({d: c[0]["document_name"] for d, c in restamped.items()})
                await self._read.put(Batch(docs, names, existed, retagged, restamped))
        finally:
            await self._read.put(None)

    async def _restamp(
        self,
        todo: list[ObjectRef],
        retag: set[str],
        versions: dict[str, Stored],
        outside: dict[str, Outside | str],
        ids: dict[str, str],
    ) -> tuple[list[ObjectRef], dict[str, list[dict[str, Any]]]]:
        """Of ``todo``, the documents to re-tag whose stored chunks can be re-stamped
        (``indexer.restamp``): their chunks; the rest, to be read."""
        wanted = [
            (ref, ids[ref.key], here, versions[ids[ref.key]].chunks)
            for ref in todo
            if ids[ref.key] in retag and isinstance(here := outside[ref.key], Outside)
        ]
        if not wanted:
            return todo, {}
        found = await restamp_stored(
            self.es, self.source, self.options, self.loader.settings, wanted, self.loader.reading
        )
        restamped: dict[str, list[dict[str, Any]]] = {}
        for ref in todo:
            if (result := found.get(ref.key)) is None:
                continue
            self.progress(ref.key)
            if isinstance(result, str):  # (it now fails: its older, other roles withdrawn)
                self._fail(ref.key, ids[ref.key], result, True)
            else:
                restamped[ids[ref.key]] = result
        return [ref for ref in todo if ref.key not in found], restamped

    def _fail(self, key: str, document_id: str, reason: str, withdrawn: bool) -> None:
        """Record a failed document; ``withdrawn``: its older chunks leave the index."""
        if withdrawn:
            self.report.withdraw(key, document_id, reason)
        else:
            self.report.fail(key, reason)

    async def embed(self) -> None:
        """Stage 2: vectors for every chunk of a batch (when an embedder is configured)."""
        try:
            while (batch := await self._read.get()) is not None:
                if self.embedder is not None and not self.options.dry_run and batch.docs:
                    await embed_batch(self.embedder, batch, self.report, self.embed_progress)
                await self._embedded.put(batch)
        finally:
            await self._embedded.put(None)

    def _next_refs(self) -> list[ObjectRef]:
        """Up to ``batch_size`` objects or ``batch_bytes`` of them, whichever comes first
        (of this run's shard only, with ``--shard``)."""
        batch: list[ObjectRef] = []
        size = 0
        shard, kb, tenant = self.options.shard, self.options.knowledge_id, self.options.tenant
        for ref in self._listing:
            if shard is not None and not shard.holds(document_id(kb, ref.identity, tenant)):
                continue
            batch.append(ref)
            size += ref.size
            if len(batch) >= self.options.batch_size or size >= self.options.batch_bytes:
                break
        return batch
