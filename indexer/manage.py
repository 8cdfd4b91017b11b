"""Index management: statistics, deleting documents, rebuilding behind a tenant's alias,
and splitting the shared index of earlier versions into one index per tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_scan, async_streaming_bulk

from indexer.store import delete_matching, kb_query, refresh
from indexer.writing import EMBED_SLICE
from retrieval_svc.acl import DEFAULT_TENANT, TENANT_FIELD
from retrieval_svc.embedding import Embedder, EmbeddingModel
from retrieval_svc.search.index import (
    index_models,
    index_name,
    legacy_layout,
    put_template,
    template_name,
    tenant_indices,
)
from retrieval_svc.tenancy import tenant_alias


async def tenant_aliases(es: AsyncElasticsearch, alias: str) -> dict[str, list[str]]:
    """Every tenant's alias under ``alias``, with the indices behind it."""
    held = await es.options(ignore_status=404).indices.get_alias(name=tenant_indices(alias))
    out: dict[str, list[str]] = {}
    for index, body in held.items():
        for name in body.get("aliases", {}) if isinstance(body, dict) else ():
            out.setdefault(name, []).append(index)
    return {name: sorted(indices) for name, indices in sorted(out.items())}


async def stats(es: AsyncElasticsearch, alias: str) -> dict[str, Any]:
    """Every tenant's alias and indices, analysis in use, and per knowledge base counts."""
    aliases = await tenant_aliases(es, alias)
    template = await es.options(ignore_status=404).indices.get_index_template(
        name=template_name(alias)
    )
    found = template.get("index_templates") or [{}]
    meta = found[0].get("index_template", {}).get("_meta", {})
    response = await es.search(
        index=tenant_indices(alias),
        size=0,
        track_total_hits=True,
        allow_no_indices=True,
        ignore_unavailable=True,
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
    models = await index_models(es, tenant_indices(alias))
    aggs = response.get("aggregations") or {"tenants": {"buckets": []}}
    return {
        "alias": alias,
        "tenants": aliases,
        "indices": sorted(i for indices in aliases.values() for i in indices),
        "legacy": await legacy_layout(es, alias),
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
            for t in aggs["tenants"]["buckets"]
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


@dataclass(frozen=True, slots=True)
class CopyOptions:
    """How chunks are copied into a new index: re-embedded or not, and progress."""

    embedder: Embedder | None = None
    model: EmbeddingModel | None = None
    reembed: bool = False
    progress: Callable[[int], None] | None = None


async def _copy(
    es: AsyncElasticsearch, source: str, query: dict[str, Any], new: str, options: CopyOptions
) -> int:
    """Copy the chunks of ``source`` matching ``query`` into ``new`` (scan + bulk, no reindex
    module needed), re-embedding them if asked; how many. The copy is counted against the
    source; on any failure ``new`` is deleted and the error raised."""
    model, embedder = options.model, options.embedder

    async def copies() -> AsyncIterator[dict[str, Any]]:
        async for hit in async_scan(es, index=source, query={"query": query}, size=1000):
            chunk = hit["_source"]
            # Chunks from before tenants existed belong to the default tenant (the migration).
            chunk.setdefault(TENANT_FIELD, DEFAULT_TENANT)
            if model is None:
                chunk.pop("embedding", None)  # BM25 only: the new index has no vector field
            yield {"_index": new, "_id": hit["_id"], "_source": chunk}

    async def embedded(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert embedder is not None
        vectors = await embedder.embed_passages([a["_source"]["content"] for a in batch])
        for action, vector in zip(batch, vectors, strict=True):
            action["_source"]["embedding"] = vector
        return batch

    async def actions() -> AsyncIterator[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        async for action in copies():
            if not options.reembed:
                yield action
                continue
            batch.append(action)
            if len(batch) >= EMBED_SLICE:
                for done in await embedded(batch):
                    yield done
                batch = []
        for done in await embedded(batch) if batch else []:
            yield done

    copied = 0
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
            if options.progress and copied % 1000 == 0:
                options.progress(copied)
        await es.indices.refresh(index=new)
        source_count = int((await es.count(index=source, query=query))["count"])
        new_count = int((await es.count(index=new))["count"])
        if new_count != source_count:
            raise RuntimeError(f"copied {new_count} chunks of {source_count}; alias not swapped")
    except BaseException:
        await es.options(ignore_status=404).indices.delete(index=new)
        raise
    return copied


async def _next_index(es: AsyncElasticsearch, own: str) -> tuple[list[str], str]:
    """The indices behind a tenant's alias ``own`` now, and the name of its next one."""
    held = await es.options(ignore_status=404).indices.get_alias(name=own)
    old = sorted(i for i, body in held.items() if isinstance(body, dict) and "aliases" in body)
    generation = max((int(name.rsplit("-", 1)[1]) for name in old), default=0) + 1
    return old, index_name(own, generation)


async def _swap(es: AsyncElasticsearch, own: str, old: list[str], new: str) -> None:
    """Point ``own`` at ``new`` instead of ``old``: one atomic alias update."""
    swap: list[dict[str, Any]] = [{"remove": {"index": i, "alias": own}} for i in old]
    swap.append({"add": {"index": new, "alias": own, "is_write_index": True}})
    await es.indices.update_aliases(actions=swap)


@dataclass(frozen=True, slots=True)
class Rebuild:
    """How ``rebuild`` and ``split_legacy`` build the new indices: from the template of these
    layout settings, re-embedding with ``embedder`` when ``model`` is not the stored one."""

    keep_old: bool = False
    progress: Callable[[int], None] | None = None
    embedder: Embedder | None = None
    model: EmbeddingModel | None = None
    vector_index_type: str = "int8_hnsw"
    shards: int = 1
    replicas: str = "0-1"
    installation: str | None = None

    async def prepare(self, es: AsyncElasticsearch, alias: str, source: str) -> CopyOptions:
        """Put the current template for ``alias``; how to copy the chunks behind ``source``."""
        await put_template(
            es,
            alias,
            self.model,
            vector_index_type=self.vector_index_type,
            shards=self.shards,
            replicas=self.replicas,
            installation=self.installation,
        )
        stored = await index_models(es, source)
        reembed = self.embedder is not None and any(m != self.model for m in stored.values())
        return CopyOptions(self.embedder, self.model, reembed, self.progress)


async def rebuild(
    es: AsyncElasticsearch, alias: str, tenant: str, how: Rebuild = Rebuild()
) -> dict[str, Any]:
    """Copy ``tenant``'s chunks into a new index made from the current template, then swap
    its alias.

    Readers see the old index until the swap, which is one atomic alias update. When
    ``model`` differs from the model an old index was built with (or it has none), every
    chunk is re-embedded on the way: this is how an index moves to another embedding model.
    Chunks written by an indexer during the copy may miss the new index: re-run the indexer
    afterwards (it is incremental) or pause it.
    """
    own = tenant_alias(alias, tenant)
    options = await how.prepare(es, alias, own)
    old, new = await _next_index(es, own)
    await es.indices.create(index=new)
    copied = await _copy(es, own, {"match_all": {}}, new, options) if old else 0
    await _swap(es, own, old, new)
    if old and not how.keep_old:
        await es.indices.delete(index=",".join(old))
    return {
        "alias": own,
        "tenant": tenant,
        "old": old,
        "new": new,
        "chunks": copied,
        "kept_old": how.keep_old,
        "reembedded": options.reembed,
        "embedding": how.model.as_meta() if how.model else None,
    }


def legacy_tenant_query(tenant: str) -> dict[str, Any]:
    """A tenant's chunks in the shared index; those written before tenants are the default's."""
    own: dict[str, Any] = {"term": {TENANT_FIELD: tenant}}
    if tenant != DEFAULT_TENANT:
        return own
    unowned = {"bool": {"must_not": [{"exists": {"field": TENANT_FIELD}}]}}
    return {"bool": {"should": [own, unowned], "minimum_should_match": 1}}


async def split_legacy(
    es: AsyncElasticsearch, alias: str, how: Rebuild = Rebuild()
) -> dict[str, Any]:
    """Split the shared index behind ``alias`` (earlier versions' layout) into an index per
    tenant, then take the shared one away (its alias removed; the index deleted unless
    ``keep_old``). Every tenant's copy is counted before any alias moves."""
    options = await how.prepare(es, alias, alias)
    legacy = sorted((await es.indices.get_alias(name=alias)).keys())
    found = await es.search(
        index=alias,
        size=0,
        aggs={"t": {"terms": {"field": TENANT_FIELD, "missing": DEFAULT_TENANT, "size": 10_000}}},
    )
    tenants = sorted({str(b["key"]) for b in found["aggregations"]["t"]["buckets"]})
    done: list[tuple[str, list[str], str, int]] = []
    try:
        for tenant in tenants:
            own = tenant_alias(alias, tenant)
            old, new = await _next_index(es, own)
            await es.indices.create(index=new)
            copied = await _copy(es, alias, legacy_tenant_query(tenant), new, options)
            done.append((own, old, new, copied))
    except BaseException:
        for _own, _old, new, _copied in done:  # nothing has moved yet: undo the copies
            await es.options(ignore_status=404).indices.delete(index=new)
        raise
    for own, old, new, _copied in done:
        await _swap(es, own, old, new)
    await es.indices.update_aliases(
        actions=[{"remove": {"index": i, "alias": alias}} for i in legacy]
    )
    if not how.keep_old:
        await es.indices.delete(index=",".join(legacy))
    return {
        "alias": alias,
        "split": {own: {"index": new, "chunks": copied} for own, _old, new, copied in done},
        "old": legacy,
        "kept_old": how.keep_old,
        "reembedded": options.reembed,
        "embedding": how.model.as_meta() if how.model else None,
    }
