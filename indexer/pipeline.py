"""Indexing a source: list → skip unchanged → read, parse, chunk → embed → bulk → drop stale.

Three stages run at once on consecutive batches: reading and parsing batch N+2, embedding
batch N+1 and writing batch N overlap (at most three batches in memory), so embedding never
waits behind Elasticsearch nor Elasticsearch behind embedding.

Work goes in batches of objects. For each batch the indexer asks Elasticsearch which
versions (``source_etag``) its documents have; a document whose every chunk carries the
object's current ETag is skipped. A changed document is written chunk by chunk (ids are
deterministic, so chunks are overwritten in place), then every chunk of it that carries
another ETag or lies past its new end is deleted. A crash between the two steps leaves a
document with mixed ETags, which the next run sees as changed and repairs: re-runs converge.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from string import Formatter
from typing import Any
from zoneinfo import ZoneInfo

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk

from indexer.chunking import ChunkOptions
from indexer.documents import DocumentError, SourceObject, build_chunks, document_id
from indexer.parsers import parse
from indexer.sources import ObjectRef, Source
from indexer.store import (
    current_versions,
    delete_matching,
    kb_query,
    prune,
    refresh,
    stale_query,
)
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.embedding import Embedder
from retrieval_svc.settings import DEFAULT_TIMEZONE

log = logging.getLogger(__name__)

URL_FIELDS = frozenset({"key", "uri", "bucket", "name"})


@dataclass(frozen=True, slots=True)
class IndexOptions:
    """What to index into, and how."""

    knowledge_id: str
    alias: str
    tenant: str = DEFAULT_TENANT
    dataset_name: str = ""
    chunk: ChunkOptions = field(default_factory=ChunkOptions)
    url_template: str | None = None
    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)
    prune: bool = False
    force: bool = False
    dry_run: bool = False
    batch_size: int = 500
    batch_bytes: int = 32 * 1024 * 1024
    concurrency: int = 4
    timezone: str = DEFAULT_TIMEZONE  # where date-only metadata values are read (RSVC_TIMEZONE)

    def __post_init__(self) -> None:
        if self.url_template is not None:
            names = {f for _, f, _, _ in Formatter().parse(self.url_template) if f is not None}
            unknown = names - URL_FIELDS
            if unknown:
                allowed = ", ".join(sorted(URL_FIELDS))
                raise ValueError(f"--url-template uses {sorted(unknown)}; allowed: {allowed}")


@dataclass(slots=True)
class Report:
    """What a run did; ``ok`` is false when any document or chunk failed."""

    source: str
    knowledge_id: str
    dry_run: bool = False
    documents_seen: int = 0
    documents_indexed: int = 0
    documents_skipped: int = 0
    documents_failed: int = 0
    documents_pruned: int = 0
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    embedding_s: float = 0.0
    chunks_failed: int = 0
    stale_chunks_deleted: int = 0
    bytes_read: int = 0
    duration_s: float = 0.0
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every document and chunk went in."""
        return not self.failures and not self.chunks_failed

    def fail(self, document: str, reason: str) -> None:
        """Record a document that was not indexed."""
        self.documents_failed += 1
        self.failures.append({"document": document, "reason": reason})
        log.warning("not indexed: %s: %s", document, reason)


Progress = Callable[[str], None]
EmbedProgress = Callable[[int], None]  # chunks embedded since the last call

EMBED_SLICE = 64  # chunks per embedding call: progress granularity, and bounded memory


def _url(options: IndexOptions, ref: ObjectRef, bucket: str) -> str:
    if options.url_template is None:
        return ref.uri
    name = ref.key.rsplit("/", 1)[-1]
    return options.url_template.format(key=ref.key, uri=ref.uri, bucket=bucket, name=name)


def load_document(source: Source, ref: ObjectRef, options: IndexOptions) -> list[dict[str, Any]]:
    """Read, parse and chunk one object (blocking: run it in a thread)."""
    data = source.read(ref)
    parsed = parse(ref.key, data)
    manifest = options.manifest.get(ref.key) or options.manifest.get(ref.uri) or {}
    obj = SourceObject(
        uri=ref.uri,
        identity=ref.identity,
        name=ref.key,
        text=parsed.text,
        etag=ref.etag,
        front_matter=parsed.front_matter,
        metadata_layers=(source.sidecar(ref), {k: v for k, v in manifest.items() if k != "path"}),
    )
    bucket = ref.uri.split("/")[2] if "://" in ref.uri else ""
    return build_chunks(
        obj,
        knowledge_id=options.knowledge_id,
        dataset_name=options.dataset_name or options.knowledge_id,
        url=_url(options, ref, bucket),
        options=options.chunk,
        tz=ZoneInfo(options.timezone),
        tenant=options.tenant,
    )


async def _bulk(
    es: AsyncElasticsearch, alias: str, docs: dict[str, list[dict[str, Any]]], report: Report
) -> set[str]:
    """Write the chunks; the ids of documents with a failed chunk."""
    owner = {chunk["chunk_id"]: doc_id for doc_id, chunks in docs.items() for chunk in chunks}

    async def actions() -> AsyncIterator[dict[str, Any]]:
        for chunks in docs.values():
            for chunk in chunks:
                yield {"_index": alias, "_id": chunk["chunk_id"], "_source": chunk}

    failed: set[str] = set()
    async for ok, item in async_streaming_bulk(
        es,
        actions(),
        chunk_size=500,
        max_chunk_bytes=10 * 1024 * 1024,
        max_retries=5,
        initial_backoff=1,
        retry_on_status=(429,),
        raise_on_error=False,
        raise_on_exception=False,
    ):
        if ok:
            report.chunks_indexed += 1
            continue
        report.chunks_failed += 1
        info = next(iter(item.values()))
        failed.add(owner.get(str(info.get("_id", "")), str(info.get("_id", ""))))
        log.error("bulk item failed: %s", info.get("error") or info.get("status"))
    return failed


@dataclass(slots=True)
class _Batch:
    """One batch, read and parsed, waiting to be written."""

    docs: dict[str, list[dict[str, Any]]]
    names: dict[str, str]
    existed: set[str]  # documents that had chunks before (only they can leave stale ones)


async def embed_batch(
    embedder: Embedder, batch: _Batch, report: Report, progress: EmbedProgress | None = None
) -> None:
    """Attach a passage vector to every chunk of ``batch`` (in slices, for progress)."""
    chunks = [chunk for doc in batch.docs.values() for chunk in doc]
    started = time.perf_counter()
    for i in range(0, len(chunks), EMBED_SLICE):
        part = chunks[i : i + EMBED_SLICE]
        vectors = await embedder.embed_passages([c["content"] for c in part])
        for chunk, vector in zip(part, vectors, strict=True):
            chunk["embedding"] = vector
        report.chunks_embedded += len(part)
        if progress:
            progress(len(part))
    report.embedding_s = round(report.embedding_s + time.perf_counter() - started, 3)


async def index_source(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    *,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    embed_progress: EmbedProgress | None = None,
) -> Report:
    """Index ``source`` into ``options.knowledge_id``; one bad document never stops the rest.

    Parsing, embedding (when ``embedder``) and writing run as overlapping stages.
    """
    run = _IndexRun(es, source, options, progress, embedder, embed_progress)
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
        self.es, self.source, self.options = es, source, options
        self.progress = progress or (lambda _key: None)
        self.embedder, self.embed_progress = embedder, embed_progress
        self.report = Report(
            source=source.description, knowledge_id=options.knowledge_id, dry_run=options.dry_run
        )
        self.seen: set[str] = set()  # document ids in the source (for --prune)
        self._listing = iter(source.list())
        self._read: asyncio.Queue[_Batch | None] = asyncio.Queue(maxsize=1)
        self._embedded: asyncio.Queue[_Batch | None] = asyncio.Queue(maxsize=1)

    async def run(self) -> Report:
        started = time.perf_counter()
        options, report = self.options, self.report
        kb, alias, tenant = options.knowledge_id, options.alias, options.tenant
        # A first load into an empty knowledge base has no versions to compare with (nor does
        # a dry run for a tenant whose index does not exist yet).
        counted = await self.es.options(ignore_status=404).count(
            index=alias, query=kb_query(tenant, kb)
        )
        has_chunks = bool(counted.get("count", 0))
        stages = [asyncio.create_task(self.read(has_chunks)), asyncio.create_task(self.embed())]
        try:
            while (batch := await self._embedded.get()) is not None:
                await _write(self.es, alias, batch, options, report)
            for stage in stages:
                await stage  # re-raises a stage's failure
        finally:
            for stage in stages:
                if not stage.done():
                    stage.cancel()
        if options.prune and not options.dry_run:
            report.documents_pruned = await prune(self.es, alias, tenant, kb, self.seen)
        if not options.dry_run:
            await refresh(self.es, alias)
        report.duration_s = round(time.perf_counter() - started, 3)
        return report

    async def read(self, has_chunks: bool) -> None:
        """Stage 1: batches of changed documents, parsed, onto the next stage's queue."""
        options, report = self.options, self.report
        kb, tenant = options.knowledge_id, options.tenant
        try:
            while batch := await asyncio.to_thread(self._next_refs):
                ids = {ref.key: document_id(kb, ref.identity, tenant) for ref in batch}
                self.seen.update(ids.values())
                report.documents_seen += len(batch)
                versions = (
                    await current_versions(self.es, options.alias, tenant, kb, list(ids.values()))
                    if has_chunks
                    else {}
                )
                todo = []
                for ref in batch:
                    if not options.force and versions.get(ids[ref.key]) == {ref.etag}:
                        report.documents_skipped += 1
                        self.progress(ref.key)
                    else:
                        todo.append(ref)
                docs: dict[str, list[dict[str, Any]]] = {}
                for ref, result in await self._load(todo):
                    self.progress(ref.key)
                    if isinstance(result, str):
                        report.fail(ref.key, result)
                        continue
                    report.bytes_read += ref.size
                    docs[ids[ref.key]] = result
                names = {ids[ref.key]: ref.key for ref in todo}
                await self._read.put(_Batch(docs, names, {d for d in docs if d in versions}))
        finally:
            await self._read.put(None)

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
        """Up to ``batch_size`` objects or ``batch_bytes`` of them, whichever comes first."""
        batch: list[ObjectRef] = []
        size = 0
        for ref in self._listing:
            batch.append(ref)
            size += ref.size
            if len(batch) >= self.options.batch_size or size >= self.options.batch_bytes:
                break
        return batch

    async def _load(self, refs: list[ObjectRef]) -> list[tuple[ObjectRef, Any]]:
        """Parse ``refs`` in ``concurrency`` threads, each taking every n-th object."""
        n = max(1, min(self.options.concurrency, len(refs)))
        parts = await asyncio.gather(
            *(asyncio.to_thread(self._parse, refs[i::n]) for i in range(n))
        )
        return [item for part in parts for item in part]

    def _parse(self, refs: list[ObjectRef]) -> list[tuple[ObjectRef, list[dict[str, Any]] | str]]:
        """Read and parse some objects (in a worker thread); failures become their reason."""
        out: list[tuple[ObjectRef, list[dict[str, Any]] | str]] = []
        for ref in refs:
            try:
                out.append((ref, load_document(self.source, ref, self.options)))
            except DocumentError as exc:
                out.append((ref, str(exc)))
            except Exception as exc:  # a read error: report it, keep going
                out.append((ref, f"{type(exc).__name__}: {exc}"))
        return out


async def _write(
    es: AsyncElasticsearch, alias: str, batch: _Batch, options: IndexOptions, report: Report
) -> None:
    """Write a batch's chunks, then remove what the previous versions left behind."""
    if options.dry_run:
        report.documents_indexed += len(batch.docs)
        report.chunks_indexed += sum(len(c) for c in batch.docs.values())
        return
    failed = await _bulk(es, alias, batch.docs, report) if batch.docs else set()
    for doc_id in failed:
        report.fail(batch.names.get(doc_id, doc_id), "some chunks were not written (see log)")
    written = [
        (doc_id, chunks[0]["source_etag"], len(chunks))
        for doc_id, chunks in batch.docs.items()
        if doc_id not in failed
    ]
    report.documents_indexed += len(written)
    replaced = [w for w in written if w[0] in batch.existed]
    if replaced:
        await refresh(es, alias)  # the overwritten chunks must be visible
        report.stale_chunks_deleted += await delete_matching(es, alias, stale_query(replaced))
