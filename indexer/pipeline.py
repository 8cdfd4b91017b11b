"""Indexing a source into Elasticsearch: parse, chunk, bulk, and drop stale chunks."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk, async_scan, async_streaming_bulk

from indexer.chunking import ChunkOptions
from indexer.documents import DocumentError, build_chunks
from indexer.sources import load_local, local_files

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Report:
    """What a run did."""

    documents_indexed: int = 0
    chunks_indexed: int = 0
    chunks_failed: int = 0
    stale_chunks_deleted: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every document and chunk went in."""
        return not self.failures and not self.chunks_failed


@dataclass(frozen=True, slots=True)
class IndexJob:
    """What to index and how."""

    source: Path
    knowledge_id: str
    dataset_name: str
    alias: str
    options: ChunkOptions = field(default_factory=ChunkOptions)


async def index_folder(
    es: AsyncElasticsearch,
    job: IndexJob,
    *,
    on_document: Callable[[str], None] | None = None,
) -> Report:
    """Index every text file under ``job.source``; one bad document never stops the rest."""
    report = Report()
    root = job.source.resolve()
    if not root.is_dir():
        raise NotADirectoryError(f"{job.source} is not a folder")
    indexed: dict[str, int] = {}

    async def actions() -> AsyncIterator[dict[str, Any]]:
        for path in local_files(root):
            name = path.relative_to(root).as_posix()
            try:
                docs = build_chunks(
                    load_local(path, root),
                    knowledge_id=job.knowledge_id,
                    dataset_name=job.dataset_name,
                    options=job.options,
                )
            except (DocumentError, OSError) as exc:
                report.failures.append({"document": name, "reason": str(exc)})
                log.warning("not indexed: %s: %s", name, exc)
                continue
            finally:
                if on_document:
                    on_document(name)
            indexed[docs[0]["document_id"]] = len(docs)
            report.documents_indexed += 1
            for doc in docs:
                yield {"_index": job.alias, "_id": doc["chunk_id"], "_source": doc}

    async for ok, item in async_streaming_bulk(
        es,
        actions(),
        chunk_size=500,
        max_chunk_bytes=10 * 1024 * 1024,
        max_retries=5,
        retry_on_status=(429,),
        raise_on_error=False,
        raise_on_exception=False,
    ):
        if ok:
            report.chunks_indexed += 1
        else:
            report.chunks_failed += 1
            log.error("bulk item failed: %s", item)
    await es.indices.refresh(index=job.alias)
    for doc_id, count in indexed.items():
        report.stale_chunks_deleted += await delete_chunks_after(es, job.alias, doc_id, count)
    await es.indices.refresh(index=job.alias)
    return report


async def delete_chunks_after(
    es: AsyncElasticsearch, alias: str, doc_id: str, last_position: int
) -> int:
    """Delete a document's chunks past ``last_position`` (left over when it shrank).

    Uses scan + bulk delete rather than ``_delete_by_query``, which lives in an optional
    Elasticsearch module.
    """
    query = {
        "bool": {
            "filter": [
                {"term": {"document_id": doc_id}},
                {"range": {"segment_position": {"gt": last_position}}},
            ]
        }
    }
    stale = [
        {"_op_type": "delete", "_index": hit["_index"], "_id": hit["_id"]}
        async for hit in async_scan(es, index=alias, query={"query": query}, _source=False)
    ]
    if not stale:
        return 0
    deleted, _ = await async_bulk(es, stale, raise_on_error=False)
    return deleted
