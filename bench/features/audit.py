"""What the audit trail costs (issue #28): the service's CPU per search with
``RSVC_AUDIT=elasticsearch`` against ``off`` at concurrency 16, and the events per second the
Elasticsearch sink writes before its queue drops.

    python -m bench.features.audit [--requests 3000] [--out bench/results/audit]

Two one-process ``retrieval-svc serve`` runs on the sample corpus (BM25), one per setting,
measured in rounds (each waits for the writer's last batch); then the sink's ceiling: the
sink alone, offered events at rising rates for a few seconds each, what it wrote per second
and what its queue dropped. Prints and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

import aiohttp

from bench.harness import parser as harness_parser
from bench.harness import print_result
from bench.harness.measure import drive
from bench.harness.service import cpu_seconds, sample_service
from retrieval_svc.words import say

KEY = "bench-audit-key-0123456789"
QUERIES = ["巡更点标签损坏怎么办", "配电房倒闸操作", "访客如何登记", "电梯维保记录"]


async def measure(args: argparse.Namespace, audit: str, port: int) -> dict[str, Any]:
    env = {"RSVC_AUDIT": audit, "RSVC_AUDIT_QUEUE_SIZE": str(args.queue)}
    url = f"http://127.0.0.1:{port}"
    async with (
        sample_service(args.es_url, port, f"rsvc-bench-audit-{audit}", KEY, env) as child,
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {KEY}"}) as http,
    ):

        async def search(q: str) -> int:
            body = {"query": q, "knowledge_ids": ["building-ops"], "top_k": 5}
            async with http.post(f"{url}/v1/search", json=body) as resp:
                assert resp.status == 200, await resp.text()
                return resp.status

        items = [QUERIES[i % len(QUERIES)] for i in range(args.requests)]
        cpu = []
        for _ in range(args.rounds):
            before = cpu_seconds(child.pid)
            run = await drive(search, items, 16)
            await asyncio.sleep(1.5)  # (the writer's share: its last batch, for both settings)
            cpu.append((cpu_seconds(child.pid) - before) * 1000 / len(items))
        out: dict[str, Any] = {"cpu_ms_per_request": round(statistics.median(cpu), 3),
                               "latency_at_16": run.summary()}  # fmt: skip
        return out


async def sink_ceiling(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The Elasticsearch sink alone: events offered at a rate for a few seconds, what it
    wrote per second and what it dropped, rate by rate."""
    from elasticsearch import AsyncElasticsearch

    from retrieval_svc.audit import Audit, audit_prefix
    from retrieval_svc.chunks import UnifiedChunk
    from retrieval_svc.metrics import Metrics
    from retrieval_svc.settings import Settings

    alias = "rsvc-bench-audit-sink"
    settings = Settings(
        _env_file=None,
        auth_disabled=True,
        index_alias=alias,
        audit="elasticsearch",
        audit_queue_size=args.queue,
    )
    chunks = [
        UnifiedChunk(content="x", source_type="rag", chunk_id=f"c{i}", document_id=f"d{i}")
        for i in range(5)
    ]
    rows = []
    for rate in args.rates:
        es = AsyncElasticsearch(args.es_url, request_timeout=60)
        metrics = Metrics()
        audit = Audit(settings, es, metrics)
        await audit.start()
        started = time.perf_counter()
        sent = 0
        while (elapsed := time.perf_counter() - started) < args.seconds:
            for _ in range(int(rate * elapsed) - sent):
                audit.record(
                    key="b",
                    actor="key:b",
                    tenant="bench",
                    user_id="u",
                    roles=1,
                    knowledge_ids=["kb"],
                    mode="bm25",
                    chunks=chunks,
                    request_id="r",
                    route="/v1/search",
                    query="q",
                )
                sent += 1
            await asyncio.sleep(0.01)
        await audit.stop()
        wall = time.perf_counter() - started

        def count(outcome: str, metrics: Metrics = metrics) -> float:
            value = metrics.registry.get_sample_value(
                "rsvc_audit_events_total", {"outcome": outcome}
            )
            return value or 0.0

        rows.append(
            {
                "offered_per_s": rate,
                "written_per_s": round(count("written") / wall),
                "dropped": count("dropped"),
                "failed": count("failed"),
            }
        )
        await es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(alias)}*")
        await es.close()
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    off = await measure(args, "off", args.port)
    audited = await measure(args, "elasticsearch", args.port + 1)
    return {
        "requests_per_round": args.requests,
        "off": off,
        "elasticsearch": audited,
        "sink": await sink_ceiling(args),
        "audit_added_cpu_ms": round(audited["cpu_ms_per_request"] - off["cpu_ms_per_request"], 3),
    }


def main() -> None:
    parser = harness_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queue", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=18095)
    parser.add_argument("--rates", type=int, nargs="+", default=[2000, 10000, 20000, 50000, 100000])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print_result(result, args.out)
    print(say("bench_audit_cpu", ms=result["audit_added_cpu_ms"]), file=sys.stderr)


if __name__ == "__main__":
    main()
