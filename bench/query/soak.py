"""Soak: hold ~80% of the measured maximum QPS for a bounded time; count errors and watch the
service's resident memory.

    python -m bench.query.soak --duration 600            # documented long run
    python -m bench.query.soak --duration 20 --smoke     # CI variant
Exit status 1 if any request failed or RSS grew by 10% or more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import CACHE
from bench.harness.measure import drive
from bench.harness.service import memory_mb
from bench.query import corpus
from bench.query.common import drop_alias, index_corpus
from bench.query.processes import Processes, service_client
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings


def rss_mb(pid: int) -> float:
    """Resident memory of a process now (MB)."""
    return memory_mb(pid)["VmRSS"]


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    alias = "rsvc-soak"
    es = make_es_client(ElasticsearchSettings(es_url=es_url), timeout_s=120)
    try:
        await index_corpus(es, alias, corpus.write_corpus(CACHE, args.chunks))
        bodies = [
            {
                "query": q.text,
                "knowledge_ids": [corpus.KNOWLEDGE_ID],
                "top_k": 10,
                "principal": {"roles": q.roles},
                **({"filter": q.filter} if q.filter else {}),
            }
            for q in corpus.queries(500, seed=23)
        ]
        with Processes(es_url, alias, CACHE / "soak") as procs:
            service_pid = procs.service_pid
            async with service_client(procs.port, connections=32) as http:

                async def call(body: dict[str, Any]) -> int:
                    resp = await http.post("/v1/search", json=body)
                    resp.raise_for_status()
                    return resp.status_code

                probe = await drive(call, bodies * 2, 16)  # warm-up and maximum QPS
                max_qps = probe.summary()["qps"]
                target = args.qps or round(0.8 * max_qps, 1)
                rss_start = rss_mb(service_pid)
                samples = [rss_start]
                errors = sent = 0
                latencies: list[float] = []
                started = time.perf_counter()
                interval = 1 / target
                pending: set[asyncio.Task[None]] = set()

                async def one(body: dict[str, Any]) -> None:
                    nonlocal errors
                    t0 = time.perf_counter()
                    try:
                        await call(body)
                        latencies.append((time.perf_counter() - t0) * 1000)
                    except httpx.HTTPError:
                        errors += 1

                next_sample = started + 1
                while (now := time.perf_counter()) - started < args.duration:
                    task = asyncio.create_task(one(bodies[sent % len(bodies)]))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    sent += 1
                    if now >= next_sample:
                        samples.append(rss_mb(service_pid))
                        next_sample += 1
                    await asyncio.sleep(max(0.0, started + sent * interval - time.perf_counter()))
                await asyncio.gather(*pending)
                samples.append(rss_mb(service_pid))
        latencies.sort()
        growth = (samples[-1] - rss_start) / rss_start * 100
        return {
            "duration_s": args.duration,
            "max_qps": max_qps,
            "target_qps": target,
            "achieved_qps": round(sent / args.duration, 1),
            "requests": sent,
            "errors": errors,
            "p50_ms": round(latencies[len(latencies) // 2], 2) if latencies else None,
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 2) if latencies else None,
            "rss_start_mb": round(rss_start, 1),
            "rss_end_mb": round(samples[-1], 1),
            "rss_max_mb": round(max(samples), 1),
            "rss_growth_pct": round(growth, 2),
            "ok": errors == 0 and growth < 10,
        }
    finally:
        await drop_alias(es, alias)
        await es.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--qps", type=float, default=None, help="default: 80%% of measured max")
    parser.add_argument("--smoke", action="store_true", help="small corpus, for CI")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.smoke:
        args.chunks = 2000
    result = asyncio.run(soak(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
