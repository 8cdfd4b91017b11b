"""What a tenant costs now that each has its own index (issue #24): creating an empty tenant
index, and the heap it holds once created.

    python -m bench.features.tenants [--tenants 200] [--out bench/results/tenants]

Creates ``--tenants`` empty tenant indices under a private alias through the service's own
``ensure_index`` (template, alias, first index), one after another, timing each; reads the
node's heap before and after (after a forced full collection where the node is local, else
the lowest of several samples) and the cluster state's size; then deletes them. Prints and
writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.harness import parser as harness_parser
from bench.harness import print_result
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.words import say

ALIAS = "rsvc-bench-tenants"


async def heap_mb(es: AsyncElasticsearch) -> tuple[float, bool]:
    """The node's heap in use after a full collection, in MB, and whether one could be forced.

    A local node is collected with ``jcmd <pid> GC.run`` (the JDK beside the node's ``java``),
    so garbage does not count as the tenants' heap; without it, the lowest of a few samples.
    """
    info = await es.nodes.info(metric="jvm")
    collected = True
    for node in info["nodes"].values():
        pid = node["jvm"]["pid"]
        try:
            jcmd = Path(os.readlink(f"/proc/{pid}/exe")).with_name("jcmd")
            subprocess.run(
                [str(jcmd), str(pid), "GC.run"], capture_output=True, check=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError):
            collected = False
    lows = []
    for _ in range(1 if collected else 5):
        stats = await es.nodes.stats(metric="jvm")
        lows.append(sum(n["jvm"]["mem"]["heap_used_in_bytes"] for n in stats["nodes"].values()))
        await asyncio.sleep(0 if collected else 1.0)
    return float(min(lows)) / 2**20, collected


async def state_kb(es: AsyncElasticsearch) -> float:
    """The size of the cluster state (every node holds it; mappings are most of it), in kB."""
    state = await es.cluster.state(metric="metadata,routing_table")
    return len(json.dumps(dict(state))) / 1024


async def run(args: argparse.Namespace) -> dict[str, Any]:
    es = AsyncElasticsearch(args.es_url, request_timeout=120)
    try:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        before, collected = await heap_mb(es)
        state_before = await state_kb(es)
        took: list[float] = []
        for i in range(args.tenants):
            started = time.perf_counter()
            await ensure_index(es, ALIAS, tenant=f"tenant-{i:05d}", check_model=False)
            took.append((time.perf_counter() - started) * 1000)
        await es.cluster.health(index=f"{ALIAS}.*", wait_for_status="green", timeout="120s")
        await asyncio.sleep(2)
        after, _ = await heap_mb(es)
        state_after = await state_kb(es)
        shards = await es.indices.stats(index=f"{ALIAS}.*", metric="segments")
        segments = shards["_all"]["total"]["segments"]
        node = await es.nodes.info(metric="jvm")
        heap_max = sum(n["jvm"]["mem"]["heap_max_in_bytes"] for n in node["nodes"].values())
        ordered = sorted(took)
        return {
            "tenants": args.tenants,
            "create_ms": {
                "p50": round(statistics.median(took), 1),
                "p95": round(ordered[int(len(ordered) * 0.95) - 1], 1),
                "max": round(ordered[-1], 1),
                "first": round(took[0], 1),
            },
            "heap_mb": {
                "before": round(before, 1),
                "after": round(after, 1),
                "per_tenant": round((after - before) / args.tenants, 3),
                "max": round(heap_max / 2**20),
                "after_full_gc": collected,
            },
            "cluster_state_kb": {
                "before": round(state_before, 1),
                "after": round(state_after, 1),
                "per_tenant": round((state_after - state_before) / args.tenants, 2),
            },
            "segments_memory_bytes": segments.get("memory_in_bytes", 0),
        }
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()


def main() -> None:
    parser = harness_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=200)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print_result(result, args.out)
    print(say("bench_tenants", result=result), file=sys.stderr)


if __name__ == "__main__":
    main()
