"""A document whose roles changed and whose bytes did not, re-stamped from the index.

Every chunk keeps what its bytes gave it (``from_bytes``: the reader's facts, the front matter,
the title the bytes give and the chunk's own marks; see ``documents.build_chunks``). When only
what lies outside the bytes changed (a folder rule, a roles tag, a sidecar, a manifest line),
the document's new fields are those layers merged again over the stored ``from_bytes`` — the
same ``document_fields`` a read computes — and its chunks are written back with their text
and vectors as they are: nothing is read from the source but the sidecar, nothing parsed,
nothing embedded.

A document whose chunks cannot be re-stamped (written before chunks kept ``from_bytes``, or
some chunk missing) is read again as before; the result is the same either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_scan

from indexer.documents import DocumentError, SourceObject, document_fields, stamp
from indexer.loading import IndexOptions, Layers, document_layers
from indexer.permissions import Outside
from indexer.reading import ChunkSettings
from indexer.sources import ObjectRef, Source


async def stored_chunks(
    es: AsyncElasticsearch, alias: str, doc_ids: Iterable[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every stored chunk of ``doc_ids``, whole (its vector too), by document."""
    found: dict[str, list[dict[str, Any]]] = {}
    ids = sorted(set(doc_ids))
    for i in range(0, len(ids), 500):
        query = {"terms": {"document_id": ids[i : i + 500]}}
        async for hit in async_scan(es, index=alias, query={"query": query}, size=1000):
            source = hit["_source"]
            found.setdefault(str(source.get("document_id")), []).append(source)
    return found


def can_restamp(chunks: list[dict[str, Any]], count: int) -> bool:
    """Whether these stored chunks are a whole document that kept what its bytes gave."""
    positions = sorted(c.get("segment_position", 0) for c in chunks)
    return (
        len(chunks) == count
        and positions == list(range(1, count + 1))
        and all(c.get("segment_count") == count for c in chunks)
        and all(isinstance(c.get("from_bytes"), dict) for c in chunks)
    )


def restamp(
    chunks: list[dict[str, Any]],
    ref: ObjectRef,
    layers: Layers,
    url: str,
    outside: Outside,
    settings: ChunkSettings,
) -> list[dict[str, Any]]:
    """The document's chunks with the fields its layers give now (``can_restamp`` first).
    Raises DocumentError when they can no longer be indexed (its new roles refused), as a
    read would."""
    kept = chunks[0]["from_bytes"]
    obj = SourceObject(
        uri=ref.uri,
        identity=ref.identity,
        name=ref.key,
        text="",
        etag=ref.etag,
        front_matter=kept.get("front_matter") or {},
        metadata_layers=tuple(layer for _, layer in layers),
        layer_names=tuple(name for name, _ in layers),
        outside=outside,
        info=kept.get("info") or {},
    )
    fields = document_fields(obj, str(kept.get("title") or ""), settings.dataset_name, settings.tz)
    indexed_at = datetime.now(UTC).isoformat()
    out: list[dict[str, Any]] = []
    for chunk in sorted(chunks, key=lambda c: int(c["segment_position"])):
        new = {**chunk, "document_name": ref.key, "source_file_url": url}
        new["indexed_at"] = indexed_at
        stamp(new, fields, chunk["from_bytes"].get("marks") or {}, settings.source)
        out.append(new)
    return out


Chunks = list[dict[str, Any]]


async def restamp_stored(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    settings: ChunkSettings,
    wanted: list[tuple[ObjectRef, str, Outside, int]],
    reading: asyncio.Semaphore,
) -> dict[str, Chunks | str]:
    """Each of ``wanted`` (an object, its document id, what its roles come from outside its
    bytes, its stored chunk count) whose stored chunks can be re-stamped: its new chunks, or
    why it now fails. The others are not in the answer (they are read again)."""
    stored = await stored_chunks(es, options.alias, [doc_id for _, doc_id, _, _ in wanted])
    ready = [w for w in wanted if can_restamp(stored.get(w[1], []), w[3])]

    async def one(ref: ObjectRef, doc_id: str, outside: Outside) -> Chunks | str:
        try:
            async with reading:  # (its sidecar: the one thing read)
                layers, url = await asyncio.to_thread(document_layers, source, ref, options)
            return restamp(stored[doc_id], ref, layers, url, outside, settings)
        except DocumentError as exc:
            return str(exc)
        except Exception as exc:  # a sidecar read error: that document fails, the rest go on
            return f"{type(exc).__name__}: {exc}"

    results = await asyncio.gather(*(one(ref, d, here) for ref, d, here, _ in ready))
    return {ref.key: result for (ref, _, _, _), result in zip(ready, results, strict=True)}
