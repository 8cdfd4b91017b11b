"""What the field catalog's refresh costs (issue #38): one tenant's (knowledge base, role) →
fields table, counted by ``TenantReads.field_owners``, at a scale and role count.

    python -m bench.features.catalog --chunks 100000,1000000 --roles 200,10000

Per corpus: chunks of 4 knowledge bases, 25% public, the rest with 1-3 of ``--roles`` roles
(Zipf), 12 metadata fields each present on a share of the chunks (two only on restricted
chunks of a few roles). Reports per (chunks, roles): the refresh's time and pages, the
Python memory of the table it builds, and the in-memory cost of one request's visible fields
for a role set never seen before (20 roles). Results as JSON on stdout and in --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elasticsearch.helpers import async_streaming_bulk

from bench.harness import ROOT, machine
from bench.query.common import drop_alias, fresh_alias
from bench.query.corpus import TENANT
from retrieval_svc.filters import FieldCatalog
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.catalog import Owners
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.engine import SearchEngine
from retrieval_svc.settings import ElasticsearchSettings

ALIAS = "rsvc-bench-catalog"
KBS = ("kb-a", "kb-b", "kb-c", "kb-d")
FIELDS = {f"f{i}": share for i, share in enumerate((1, 0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05))}
RARE = {"r0": 3, "r1": 7}  # fields only the chunks of roles r-3 / r-7 have


def chunks(n: int, roles: int, seed: int = 5) -> Iterator[dict[str, Any]]:
    """``n`` synthetic chunks for the bulk helper."""
    rng = random.Random(seed)
    weights = [1 / (k + 1) for k in range(roles)]
    names = [f"r-{k}" for k in range(roles)]
    for i in range(n):
        held = [] if rng.random() < 0.25 else rng.choices(names, weights, k=rng.randint(1, 3))
        meta: dict[str, Any] = {f: i % 97 for f, share in FIELDS.items() if rng.random() < share}
        meta |= {"g0": "x", "g1": i} if rng.random() < 0.01 else {}
        for field, role in RARE.items():
            if f"r-{role}" in held:
                meta[field] = "rare"
        doc: dict[str, Any] = {
            "chunk_id": f"c{i}",
            "document_id": f"d{i // 4}",
            "tenant": TENANT,
            "knowledge_id": KBS[i % len(KBS)],
            "content": "巡检",
            "metadata": meta,
        }
        if held:
            doc["access_roles"] = sorted(set(held))
        yield {"_op_type": "index", "_id": doc["chunk_id"], "_source": doc}


async def one(es_url: str, n: int, roles: int) -> dict[str, Any]:
    """Build the corpus, refresh three times, and time requests' visible-field unions."""
    es = make_es_client(ElasticsearchSettings(es_url=es_url), timeout_s=300)
    try:
        index = await fresh_alias(es, ALIAS)
        started = time.perf_counter()
        async for ok, item in async_streaming_bulk(
            es, chunks(n, roles), index=index, chunk_size=2000, raise_on_error=False
        ):
            assert ok, item
        await es.indices.refresh(index=index)
        await es.indices.forcemerge(index=index, max_num_segments=1)
        built_s = time.perf_counter() - started
        metrics = Metrics()
        engine = SearchEngine(es, alias=ALIAS, saturation=1.0, deadline_s=300, metrics=metrics)
        mapping = FieldCatalog.from_mappings(await engine.get_mappings(TENANT))
        paths = mapping.metadata_paths()
        took = []
        for _ in range(3):
            t0 = time.perf_counter()
            pairs = await engine.field_owners(TENANT, paths, bound_s=300)
            took.append(time.perf_counter() - t0)
        pages = _pages(metrics)
        tracemalloc.start()
        owners = Owners.of(mapping, pairs)
        table_kb = tracemalloc.get_traced_memory()[0] / 1024
        tracemalloc.stop()
        rng = random.Random(9)
        costs = []
        for i in range(2000):
            held = {f"r-{rng.randrange(roles)}" for _ in range(19)} | {f"never-{i}"}
            t0 = time.perf_counter()
            owners.narrowed_to(owners.visible(KBS[: 1 + i % 2], held))
            costs.append((time.perf_counter() - t0) * 1e6)
        return {
            "chunks": n,
            "roles": roles,
            "fields": len(paths),
            "pairs": len(pairs),
            "build_s": round(built_s, 1),
            "refresh_s": [round(t, 3) for t in took],
            "refresh_pages": pages // 3,
            "table_kb": round(table_kb, 1),
            "request_us_p50": round(statistics.median(costs), 1),
            "request_us_p99": round(sorted(costs)[int(0.99 * len(costs))], 1),
        }
    finally:
        await drop_alias(es, ALIAS)
        await es.close()


def _pages(metrics: Metrics) -> int:
    """Requests the refreshes sent (the service's own count of its Elasticsearch calls)."""
    found = metrics.registry.get_sample_value(
        "rsvc_elasticsearch_request_duration_seconds_count",
        {"operation": "field_owners", "outcome": "ok"},
    )
    return int(found or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="100000")
    parser.add_argument("--roles", default="200,10000")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "catalog")
    args = parser.parse_args(argv)
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    rows = []
    for n in (int(c) for c in args.chunks.split(",")):
        for roles in (int(r) for r in args.roles.split(",")):
            row = asyncio.run(one(es_url, n, roles))
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
    result = {"machine": machine(), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
