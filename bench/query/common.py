"""What the cost benchmark's parts share: its folders and key, and the bench tenant's index."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk

from bench.query import corpus
from indexer.pipeline import IndexOptions, index_source, load_document
from indexer.sources import LocalSource
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.tenancy import tenant_alias

KEY = "bench-key-0123456789abcdef"


SCENARIOS = ("raw", "service", "service_cold", "dify", "service_web", "workaround")


def own(alias: str) -> str:
    """The bench tenant's alias under ``alias`` (each tenant has its own index)."""
    return tenant_alias(alias, corpus.TENANT)


async def fresh_alias(es: AsyncElasticsearch, alias: str, **layout: Any) -> str:
    """The bench tenant's index under ``alias``, new and empty; its alias."""
    await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
    await ensure_index(es, alias, tenant=corpus.TENANT, **layout)
    return own(alias)


async def drop_alias(es: AsyncElasticsearch, alias: str) -> None:
    await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
    await es.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))


async def index_corpus(es: AsyncElasticsearch, alias: str, folder: Path) -> dict[str, Any]:
    """The CLI's pipeline vs a bare async_streaming_bulk of the same chunks."""
    options = IndexOptions(
        knowledge_id=corpus.KNOWLEDGE_ID,
        alias=await fresh_alias(es, alias),
        tenant=corpus.TENANT,
        concurrency=2,
    )
    started = time.perf_counter()
    rep = await index_source(es, LocalSource(folder), options)
    cli_s = time.perf_counter() - started
    assert rep.ok, rep.failures[:3]
    # The same chunks, built beforehand, then one bare bulk into a throwaway index.
    source = LocalSource(folder)
    chunks = [c for ref in source.list() for c in load_document(source, ref, options)]
    bare = f"{alias}-bare"
    bare_own = await fresh_alias(es, bare)
    started = time.perf_counter()
    actions = ({"_index": bare_own, "_id": c["chunk_id"], "_source": c} for c in chunks)
    async for ok, _ in async_streaming_bulk(
        es,
        actions,
        chunk_size=500,
        max_chunk_bytes=10 * 1024 * 1024,
        max_retries=5,
        retry_on_status=(429,),
        raise_on_error=False,
    ):
        assert ok
    await es.indices.refresh(index=bare_own)
    bare_s = time.perf_counter() - started
    await drop_alias(es, bare)
    n = rep.chunks_indexed
    return {
        "chunks": n,
        "cli_s": round(cli_s, 2),
        "bare_s": round(bare_s, 2),
        "cli_chunks_per_s": round(n / cli_s),
        "bare_chunks_per_s": round(n / bare_s),
        "ratio": round(bare_s / cli_s, 3),
    }
