"""The write side of a run: vectors for a parsed batch, its chunks in bulk, then what its
previous versions left behind removed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk

from indexer.documents import chunk_id
from indexer.report import Report
from indexer.store import delete_ids, versioned
from retrieval_svc.embedding import Embedder
from retrieval_svc.words import say

# A bulk request's most bytes: under 1 MiB, past which aiohttp sends a body in one blocking
# write (and warns that it may hold the event loop the other stages run on).
BULK_BYTES = 960 * 1024
# How every write of chunks is sent: requests under BULK_BYTES, a 429 tried again with a
# back-off, each item's failure reported with it (never raised).
BULK: dict[str, Any] = {
    "chunk_size": 500,
    "max_chunk_bytes": BULK_BYTES,
    "max_retries": 5,
    "initial_backoff": 1,
    "retry_on_status": (429,),
    "raise_on_error": False,
    "raise_on_exception": False,
}

log = logging.getLogger("indexer.pipeline")  # (the run's one log, as before the split)

EmbedProgress = Callable[[int], None]  # chunks embedded since the last call

EMBED_SLICE = 64  # chunks per embedding call: progress granularity, and bounded memory


async def _bulk(
    es: AsyncElasticsearch,
    alias: str,
    docs: dict[str, list[dict[str, Any]]],
    report: Report,
    stamp: Callable[[], int] | None = None,
) -> set[str]:
    """Write the chunks (``stamp``: each carries the writer's version, refused over a newer
    holder's write); the ids of documents with a failed chunk."""
    owner = {chunk["chunk_id"]: doc_id for doc_id, chunks in docs.items() for chunk in chunks}
    fence = versioned(stamp)

    async def actions() -> AsyncIterator[dict[str, Any]]:
        for chunks in docs.values():
            for chunk in chunks:
                yield {"_index": alias, "_id": chunk["chunk_id"], "_source": chunk, **fence}

    failed: set[str] = set()
    async for ok, item in async_streaming_bulk(
        es,
        actions(),
        **BULK,
    ):
        if ok:
            report.chunks_indexed += 1
            continue
        report.chunks_failed += 1
        info = next(iter(item.values()))
        failed.add(owner.get(str(info.get("_id", "")), str(info.get("_id", ""))))
        log.error(say("bulk_item_failed", why=info.get("error") or info.get("status")))
    return failed


@dataclass(slots=True)
class Batch:
    """One batch, read and parsed, waiting to be written."""

    docs: dict[str, list[dict[str, Any]]]
    names: dict[str, str]
    # Documents that had chunks before (only they can leave stale ones): their highest
    # stored position.
    existed: dict[str, int]
    # Unchanged documents whose roles changed outside their bytes: re-tagged in place, their
    # chunks re-read from the source (``retag``) or re-stamped from the index (``restamped``,
    # vectors in them).
    retag: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    restamped: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def chunks(self) -> int:
        """The chunks this batch writes or re-tags."""
        return sum(sum(map(len, part.values())) for part in (self.docs, self.retag, self.restamped))

    def parts(self, chunks: int) -> Iterator[Batch]:
        """This batch as batches of whole documents, each of about ``chunks`` chunks."""
        kinds = [("docs", d) for d in self.docs] + [("retag", d) for d in self.retag]
        kinds += [("restamped", d) for d in self.restamped]
        part = Batch({}, self.names, {})
        for kind, doc_id in kinds:
            getattr(part, kind)[doc_id] = getattr(self, kind)[doc_id]
            if doc_id in self.existed:
                part.existed[doc_id] = self.existed[doc_id]
            if part.chunks >= chunks:
                yield part
                part = Batch({}, self.names, {})
        if part.chunks:
            yield part

    def join(self, later: Batch) -> Batch:
        """This batch and a later one as one (their documents are distinct)."""
        return Batch(
            {**self.docs, **later.docs},
            {**self.names, **later.names},
            {**self.existed, **later.existed},
            {**self.retag, **later.retag},
            {**self.restamped, **later.restamped},
        )


@dataclass(slots=True)
class Fence:
    """Documents a pass must no longer write: the watcher narrowed them (deleted or held) after
    the pass had read them, so the pass's copy is older than the narrowing. A write and a
    narrowing never interleave: both hold ``lock``. The watcher settles each fenced key again
    once the pass is over."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    keys: dict[str, str] = field(default_factory=dict)  # document id → its key at the source

    def drop(self, batch: Batch) -> Batch:
        """``batch`` without the fenced documents (not written, not counted)."""
        held = set(batch.docs) | set(batch.retag) | set(batch.restamped)
        if not self.keys or not held & self.keys.keys():
            return batch
        return Batch(
            {d: c for d, c in batch.docs.items() if d not in self.keys},
            batch.names,
            {d: n for d, n in batch.existed.items() if d not in self.keys},
            {d: c for d, c in batch.retag.items() if d not in self.keys},
            {d: c for d, c in batch.restamped.items() if d not in self.keys},
        )


@contextlib.asynccontextmanager
async def fencing(fences: Sequence[Fence], keys: Mapping[str, str]) -> AsyncIterator[None]:
    """Every running pass's lock held (in the order given: passes take only their own, so
    this never deadlocks) and ``keys`` (document id → key) fenced from each, while the body
    narrows them."""
    async with contextlib.AsyncExitStack() as stack:
        for fence in fences:
            await stack.enter_async_context(fence.lock)
            fence.keys.update(keys)
        yield


async def embed_batch(
    embedder: Embedder, batch: Batch, report: Report, progress: EmbedProgress | None = None
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


async def retag_batch(
    es: AsyncElasticsearch,
    alias: str,
    batch: Batch,
    dry_run: bool,
    report: Report,
    stamp: Callable[[], int] | None = None,
) -> None:
    """Re-write re-tagged documents' chunks with their new roles and metadata and the vectors
    they already have (no re-embedding). A chunk whose stored text differs from the one re-read
    fails its document (the chunking changed: ``--force`` re-writes it). Re-stamped documents
    (from the index, vectors in them) are written as they are."""
    if dry_run or not (batch.retag or batch.restamped):
        report.documents_retagged += len(batch.retag) + len(batch.restamped)
        return
    ids = [chunk["chunk_id"] for chunks in batch.retag.values() for chunk in chunks]
    kept: dict[str, dict[str, Any]] = {}
    if ids:
        found = await es.mget(
            index=alias, ids=ids, source_includes=["content_hash", "embedding"], realtime=True
        )
        kept = {d["_id"]: d.get("_source", {}) for d in found["docs"] if d.get("found")}
    ready: dict[str, list[dict[str, Any]]] = {}
    for doc_id, chunks in batch.retag.items():
        if any(
            kept.get(c["chunk_id"], {}).get("content_hash") != c["content_hash"] for c in chunks
        ):
            report.withdraw(  # (its old roles must not stay: withdrawn until re-written)
                batch.names.get(doc_id, doc_id),
                doc_id,
                "its roles changed but its text differs from the chunks stored (the chunking "
                "changed?): run again with --force to re-write it",
            )
            continue
        for chunk in chunks:
            if (vector := kept[chunk["chunk_id"]].get("embedding")) is not None:
                chunk["embedding"] = vector
        ready[doc_id] = chunks
    ready.update(batch.restamped)
    indexed = report.chunks_indexed
    failed = await _bulk(es, alias, ready, report, stamp)
    report.chunks_indexed = indexed  # (re-tagged chunks are counted as such, not as indexed)
    for doc_id in failed:  # (some chunks new roles, some old: none may stay)
        report.withdraw(batch.names.get(doc_id, doc_id), doc_id, "some chunks were not re-tagged")
    report.documents_retagged += len(ready) - len(failed)
    report.roles_change([batch.names.get(d, d) for d in ready if d not in failed])


async def write_batch(
    es: AsyncElasticsearch,
    alias: str,
    batch: Batch,
    dry_run: bool,
    report: Report,
    stamp: Callable[[], int] | None = None,
) -> None:
    """Write a batch's chunks, then remove what the previous versions left behind; re-tag
    what only changed its roles."""
    await retag_batch(es, alias, batch, dry_run, report, stamp)
    if dry_run:
        report.documents_indexed += len(batch.docs)
        report.chunks_indexed += sum(len(c) for c in batch.docs.values())
        return
    failed = await _bulk(es, alias, batch.docs, report, stamp) if batch.docs else set()
    for doc_id in failed:
        report.fail(batch.names.get(doc_id, doc_id), "some chunks were not written (see log)")
    written = [
        (doc_id, chunks[0]["source_etag"], len(chunks))
        for doc_id, chunks in batch.docs.items()
        if doc_id not in failed
    ]
    report.documents_indexed += len(written)
    # Chunk ids are <document>-<position>: the new version overwrote positions 1…count, so
    # what is stale is every position past it up to the highest one stored.
    stale = [
        chunk_id(doc_id, position)
        for doc_id, _etag, count in written
        for position in range(count + 1, batch.existed.get(doc_id, 0) + 1)
    ]
    if stale:
        report.stale_chunks_deleted += await delete_ids(es, alias, stale, stamp)
