"""What a hold costs: how long the watcher takes to hold N chunks and put the hold in force
(their roles replaced by one no principal holds, ``indexer.watch.hold``, then one refresh),
as a fenced whole ``index`` of each chunk read back, against the partial ``update`` it
replaced, and holding again what this holding already held. (How long the people who keep
access find nothing — from the hold until the document is written again — is measured by
``bench.freshness``: its ``kept`` figures.)

    python -m bench.freshness.hold --chunks 10000 --dims 384 --out bench/results/hold-10k

Each variant is timed on the same chunks, written afresh before each round (documents of
``--per-doc`` chunks, vectors of ``--dims`` when given: a hold reads and writes them back),
rounds taking turns so that a slow stretch of the shared machine falls on each.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk, async_scan

from bench.harness import finish, machine, parser
from indexer.store import HELD_ROLE
from indexer.watch.hold import hold_documents
from retrieval_svc.embedding.base import EmbeddingModel
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.tenancy import tenant_alias
from retrieval_svc.words import say

TENANT = "bench"


async def partial_update(es: AsyncElasticsearch, index: str, doc_ids: list[str]) -> int:
    """The hold as it was before it was fenced: a partial ``update`` per chunk (for
    comparison)."""
    actions: list[dict[str, Any]] = []
    for i in range(0, len(doc_ids), 500):
        query = {"terms": {"document_id": doc_ids[i : i + 500]}}
        async for hit in async_scan(es, index=index, query={"query": query}, _source=False):
            actions.append(
                {"_op_type": "update", "_index": hit["_index"], "_id": hit["_id"],
                 "doc": {"access_roles": [HELD_ROLE]}}
            )  # fmt: skip
    if actions:
        await async_bulk(es, actions, raise_on_error=False, chunk_size=500)
    return len(actions)


async def load(es: AsyncElasticsearch, index: str, docs: int, per_doc: int, dims: int) -> None:
    rng = random.Random(7)

    def chunks() -> Any:
        for d in range(docs):
            for p in range(1, per_doc + 1):
                body: dict[str, Any] = {
                    "chunk_id": f"d{d}-{p}", "document_id": f"d{d}", "knowledge_id": "kb",
                    "tenant": TENANT, "access_roles": ["法务", "人事"],
                    "document_name": f"公共/d{d:06d}.md", "segment_position": p,
                    "content": f"第{d}号记录第{p}段：配电房巡检、电梯维保与消防演练的安排。" * 8,
                }  # fmt: skip
                if dims:
                    body["embedding"] = [rng.uniform(-1, 1) for _ in range(dims)]
                yield {"_index": index, "_id": body["chunk_id"], "_source": body}

    await async_bulk(es, chunks(), chunk_size=500, max_chunk_bytes=960 * 1024)
    await es.indices.refresh(index=index)


async def run(es_url: str, chunks: int, per_doc: int, dims: int, rounds: int) -> dict[str, Any]:
    es = AsyncElasticsearch(es_url, request_timeout=120)
    alias = "rsvc-bench-hold"
    index = tenant_alias(alias, TENANT)
    docs = max(1, chunks // per_doc)
    doc_ids = [f"d{d}" for d in range(docs)]
    times: dict[str, list[float]] = {
        name: []
        for name in ("partial update", "partial update: its refresh", "fenced index",
                     "fenced index: its refresh", "held again")
    }  # fmt: skip
    count = 0

    def stamp() -> int:
        nonlocal count
        count += 1
        return (2 << 32) | count

    try:
        await es.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-*")
        model = EmbeddingModel("bench-random", dims) if dims else None
        for r in range(rounds):
            order = ["fenced index", "partial update"]
            for name in order[:: -1 if r % 2 else 1]:
                await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
                await ensure_index(es, alias, model, tenant=TENANT)
                await load(es, index, docs, per_doc, dims)
                started = time.perf_counter()
                if name == "partial update":
                    held = await partial_update(es, index, doc_ids)
                else:
                    held = await hold_documents(es, index, doc_ids, stamp)
                written = time.perf_counter()
                await es.indices.refresh(index=index)
                times[name].append(time.perf_counter() - started)
                times[f"{name}: its refresh"].append(time.perf_counter() - written)
                if name == "fenced index":
                    started = time.perf_counter()
                    again = await hold_documents(es, index, doc_ids, stamp)
                    await es.indices.refresh(index=index)
                    times["held again"].append(time.perf_counter() - started)
                    assert again == 0
                assert held == docs * per_doc, (name, held)
                seconds, refresh = times[name][-1], times[f"{name}: its refresh"][-1]
                said = say("bench_hold_round", round=r + 1, name=name, seconds=f"{seconds:.2f}",
                           refresh=f"{refresh:.2f}")  # fmt: skip
                print(said, file=sys.stderr)
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))
        await es.close()
    return {
        "machine": machine(),
        "settings": {"chunks": docs * per_doc, "per_doc": per_doc, "dims": dims, "rounds": rounds},
        "seconds": {
            name: {"median": round(statistics.median(t), 2), "all": [round(x, 2) for x in t]}
            for name, t in times.items()
        },
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__, prog="python -m bench.freshness.hold")
    p.add_argument("--chunks", type=int, default=10_000)
    p.add_argument("--per-doc", type=int, default=5, help="Chunks a document.")
    p.add_argument("--dims", type=int, default=0, help="Vector dimensions (0: none).")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    result = asyncio.run(run(args.es_url, args.chunks, args.per_doc, args.dims, args.rounds))
    return finish(result, args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
