"""Index management: statistics, deleting documents, rebuilding behind the alias."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_scan, async_streaming_bulk

from indexer.pipeline import EMBED_SLICE, delete_matching, kb_query, refresh
from retrieval_svc.acl import DEFAULT_TENANT, TENANT_FIELD
from retrieval_svc.embedding import Embedder, EmbeddingModel
from retrieval_svc.search.index import ensure_index, index_models, index_name, template_name


async def stats(es: AsyncElasticsearch, alias: str) -> dict[str, Any]:
    """Indices behind the alias, analysis in use, and per knowledge base counts."""
    indices = sorted((await es.indices.get_alias(name=alias)).keys())
    template = await es.indices.get_index_template(name=template_name(alias))
    meta = template["index_templates"][0]["index_template"].get("_meta", {})
    response = await es.search(
        index=alias,
        size=0,
        track_total_hits=True,
        aggs={
            "tenants": {
                "terms": {"field": "tenant", "missing": "(none)", "size": 1_000},
                "aggs": {
                    "kbs": {
                        "terms": {"field": "knowledge_id", "size": 10_000},
                        "aggs": {
                            "documents": {"cardinality": {"field": "document_id"}},
                            "restricted": {"filter": {"exists": {"field": "access_roles"}}},
                            "last_indexed": {"max": {"field": "indexed_at"}},
                        },
                    }
                },
            }
        },
    )
    models = await index_models(es, alias)
    return {
        "alias": alias,
        "indices": indices,
        "analysis": meta.get("analysis"),
        "embedding": {name: m.as_meta() if m else None for name, m in sorted(models.items())},
        "chunks": response["hits"]["total"]["value"],
        "knowledge_bases": [
            {
                "tenant": t["key"],
                "knowledge_id": b["key"],
                "documents": b["documents"]["value"],
                "chunks": b["doc_count"],
                "restricted_chunks": b["restricted"]["doc_count"],
                "last_indexed": b["last_indexed"].get("value_as_string"),
            }
            for t in response["aggregations"]["tenants"]["buckets"]
            for b in t["kbs"]["buckets"]
        ],
    }


def delete_query(tenant: str, knowledge_id: str, document_ids: list[str]) -> dict[str, Any]:
    """The chunks of a tenant's knowledge base, or of some of its documents."""
    more = [{"terms": {"document_id": document_ids}}] if document_ids else []
    return kb_query(tenant, knowledge_id, *more)


async def count(es: AsyncElasticsearch, alias: str, query: dict[str, Any]) -> int:
    """How many chunks match."""
    return int((await es.count(index=alias, query=query))["count"])


async def delete(
    es: AsyncElasticsearch, alias: str, tenant: str, knowledge_id: str, document_ids: list[str]
) -> int:
    """Delete a tenant's knowledge base's chunks (or some documents'); how many."""
    deleted = await delete_matching(es, alias, delete_query(tenant, knowledge_id, document_ids))
    await refresh(es, alias)
    return deleted


async def rebuild(
    es: AsyncElasticsearch,
    alias: str,
    *,
    keep_old: bool = False,
    progress: Callable[[int], None] | None = None,
    embedder: Embedder | None = None,
    model: EmbeddingModel | None = None,
    vector_index_type: str = "int8_hnsw",
    shards: int = 1,
    replicas: str = "0-1",
) -> dict[str, Any]:
    """Copy every chunk into a new index made from the current template, then swap the alias.

    Readers see the old index until the swap, which is one atomic alias update. The copy is a
    scan + bulk (no reindex module needed). When ``model`` differs from the model an old index
    was built with (or it has none), every chunk is re-embedded on the way: this is how an
    index moves to another embedding model. Chunks written by an indexer during the copy may
    miss the new index: re-run the indexer afterwards (it is incremental) or pause it.
    """
    await ensure_index(
        es,
        alias,
        model,
        vector_index_type=vector_index_type,
        check_model=False,
        shards=shards,
        replicas=replicas,
    )
    stored = await index_models(es, alias)
    reembed = embedder is not None and any(m != model for m in stored.values())
    old = sorted((await es.indices.get_alias(name=alias)).keys())
    generation = max(int(name.rsplit("-", 1)[1]) for name in old) + 1
    new = index_name(alias, generation)
    await es.indices.create(index=new)
    copied = 0

    async def copies() -> Any:
        async for hit in async_scan(es, index=alias, query={"query": {"match_all": {}}}, size=1000):
            source = hit["_source"]
            # Chunks from before tenants existed belong to the default tenant (the migration).
            source.setdefault(TENANT_FIELD, DEFAULT_TENANT)
            if model is None:
                source.pop("embedding", None)  # BM25 only: the new index has no vector field
            yield {"_index": new, "_id": hit["_id"], "_source": source}

    async def actions() -> Any:
        if not reembed:
            async for action in copies():
                yield action
            return
        assert embedder is not None
        batch: list[dict[str, Any]] = []

        async def embedded() -> list[dict[str, Any]]:
            vectors = await embedder.embed_passages([a["_source"]["content"] for a in batch])
            for action, vector in zip(batch, vectors, strict=True):
                action["_source"]["embedding"] = vector
            return batch

        async for action in copies():
            batch.append(action)
            if len(batch) >= EMBED_SLICE:
                for done in await embedded():
                    yield done
                batch = []
        if batch:
            for done in await embedded():
                yield done

    try:
        async for ok, item in async_streaming_bulk(
            es,
            actions(),
            chunk_size=1000,
            max_retries=5,
            retry_on_status=(429,),
            raise_on_error=False,
        ):
            if not ok:
                raise RuntimeError(f"copy failed: {item}")
            copied += 1
            if progress and copied % 1000 == 0:
                progress(copied)
        await es.indices.refresh(index=new)
        source_count = int((await es.count(index=alias))["count"])
        new_count = int((await es.count(index=new))["count"])
        if new_count != source_count:
            raise RuntimeError(f"copied {new_count} chunks of {source_count}; alias not swapped")
    except BaseException:
        await es.options(ignore_status=404).indices.delete(index=new)
        raise
    swap: list[dict[str, Any]] = [{"remove": {"index": i, "alias": alias}} for i in old]
    swap.append({"add": {"index": new, "alias": alias, "is_write_index": True}})
    await es.indices.update_aliases(actions=swap)
    if not keep_old:
        await es.indices.delete(index=",".join(old))
    return {
        "alias": alias,
        "old": old,
        "new": new,
        "chunks": copied,
        "kept_old": keep_old,
        "reembedded": reembed,
        "embedding": model.as_meta() if model else None,
    }
