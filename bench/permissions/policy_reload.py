"""p99 latency while a large Casbin policy reloads, against p99 with no reload (issue #14).

    python -m bench.permissions.policy_reload [--lines 100000] [--requests 3000]

The service runs as a real ``retrieval-svc serve`` process on loopback with a generated policy
of ``--lines`` grouping lines (users → roles); the samples are indexed into a private alias.
Phase one measures ``/retrieval`` (a casbin key, user ids from the policy) at concurrency 4;
phase two measures the same while the policy file is replaced every second, so the watcher
reloads it over and over (each reload parses and indexes every line). The variants are written
before the run and swapped in with a rename, so the benchmark's own client never stalls on
generating them.
Prints both p50/p99 and their ratio, and writes JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from elasticsearch import AsyncElasticsearch

from bench.harness import parser
from bench.harness.measure import drive
from bench.harness.service import index_sample, start_service
from retrieval_svc.auth.keys import hash_key
from retrieval_svc.search.index import template_name
from retrieval_svc.tenancy import DEFAULT_TENANT
from retrieval_svc.words import say

ALIAS = "rsvc-bench-reload"
KEY = "bench-reload-key-0123456789"


def write_policy(path: Path, lines: int, salt: int) -> None:
    """``lines`` users spread over 200 roles, in tenant default, plus the read grant."""
    rng = random.Random(salt)
    out = ["p, anyone, default, *, read"]
    out += [f"g, user:u{i}, r{rng.randrange(200)}, default" for i in range(lines)]
    out += [f"g, r{i}, r{i // 2}, default" for i in range(1, 200)]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


async def measure(port: int, requests: int, users: int) -> dict[str, Any]:
    rng = random.Random(5)
    bodies = [
        {
            "knowledge_id": "building-ops",
            "query": rng.choice(["巡更", "配电房", "电梯维保", "访客登记", "消防值班"]),
            "retrieval_setting": {"top_k": 3},
            "metadata_condition": {
                "conditions": [
                    {
                        "name": "user_id",
                        "comparison_operator": "is",
                        "value": f"u{rng.randrange(users)}",
                    }
                ]
            },
        }
        for _ in range(requests)
    ]
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    ) as client:

        async def call(body: dict[str, Any]) -> None:
            (await client.post("/retrieval", json=body)).raise_for_status()

        await drive(call, bodies[:40], 4)  # warm up
        run = await drive(call, bodies, 4)
    return run.summary()


def reloads(port: int) -> int:
    """Policies swapped in so far, from the service's own counter."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith('rsvc_policy_reloads_total{outcome="ok"}')
    )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-reload-"))
    policy = work / "policy.csv"
    started = time.perf_counter()
    write_policy(policy, args.lines, 0)
    variants = [work / "variant-0.csv", work / "variant-1.csv"]
    for salt, variant in enumerate(variants, start=1):
        write_policy(variant, args.lines, salt)
    seconds = f"{time.perf_counter() - started:.1f}"
    print(say("bench_policy_written", n=args.lines, seconds=seconds), file=sys.stderr)
    keys = work / "keys.json"
    keys.write_text(json.dumps([{"name": "bench", "sha256": hash_key(KEY)}]), "utf-8")
    es = AsyncElasticsearch(args.es_url)
    await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
    await index_sample(es, ALIAS, DEFAULT_TENANT)
    port = args.port
    env = {
        **os.environ,
        "RSVC_ES_URL": args.es_url,
        "RSVC_INDEX_ALIAS": ALIAS,
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_CASBIN_POLICY": str(policy),
        "RSVC_POLICY_CHECK_INTERVAL_S": "0.5",
        "RSVC_EMBEDDER": "none",
        "RSVC_PORT": str(port),
    }
    log = open(work / "service.log", "w")
    child = start_service(env=env, port=port, log=log, timeout_s=300)
    try:
        quiet = await measure(port, args.requests, args.lines)
        print(say("bench_no_reload", result=quiet), file=sys.stderr)
        stop = threading.Event()
        rewrites = 0

        def churn() -> None:
            nonlocal rewrites
            while not stop.is_set():
                rewrites += 1
                staged = work / "staged.csv"
                shutil.copyfile(variants[rewrites % 2], staged)
                os.replace(staged, policy)
                stop.wait(1.0)

        writer = threading.Thread(target=churn, daemon=True)
        writer.start()
        time.sleep(1.5)  # the first reload is under way
        before = reloads(port)
        reloading = await measure(port, args.requests, args.lines)
        reloaded = reloads(port) - before
        stop.set()
        writer.join()
        print(say("bench_while_reloading", n=reloaded, result=reloading), file=sys.stderr)
    finally:
        child.terminate()
        child.wait(timeout=30)
        log.close()
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()
    return {
        "policy_lines": args.lines,
        "no_reload": quiet,
        "while_reloading": reloading,
        "policy_rewrites": rewrites,
        "reloads_during_measurement": reloaded,
        "p99_ratio": round(reloading["p99_ms"] / quiet["p99_ms"], 2),
        "target": "p99 while reloading <= 2 x p99 without",
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--port", type=int, default=0, help="service port (default: a free one)")
    args = p.parse_args(argv)
    if not args.port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            args.port = int(sock.getsockname()[1])
    result = asyncio.run(main(args))
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
