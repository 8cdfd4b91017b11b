"""What MCP adds to a search: the service's CPU per request of MCP ``search`` against
``POST /v1/search`` for the same query, at concurrency 16 (issue #27).

    python -m bench.features.mcp [--requests 2000] [--out bench/results/mcp]

A real ``retrieval-svc serve`` (one process, BM25, the sample corpus in a private alias) is
driven by one aiohttp session; each scenario's service CPU (``/proc``) is divided by its
requests. Interleaved rounds, so a busy machine slows both alike. Prints and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from typing import Any

import aiohttp

from bench.harness import parser as harness_parser
from bench.harness import print_result
from bench.harness.measure import drive
from bench.harness.service import cpu_seconds, sample_service
from retrieval_svc.words import say

ALIAS = "rsvc-bench-mcp"
TENANT = "bench"
KEY = "bench-mcp-key-0123456789"
QUERIES = [
    "巡更点标签损坏怎么办",
    "配电房倒闸操作",
    "访客如何登记",
    "电梯维保记录",
    "消防控制室值班",
]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    url = f"http://127.0.0.1:{args.port}"
    headers = {
        "Authorization": f"Bearer {KEY}",
        "Accept": "application/json, text/event-stream",
        "X-Rsvc-User": "bench",  # MCP's identity header (a user without grants: public only)
    }
    async with sample_service(args.es_url, args.port, ALIAS, KEY) as child:
        async with aiohttp.ClientSession(headers=headers) as http:

            async def native(q: str) -> list[str]:
                body = {"query": q, "knowledge_ids": ["building-ops"], "top_k": 5}
                async with http.post(f"{url}/v1/search", json=body) as resp:
                    assert resp.status == 200, await resp.text()
                    data = await resp.json()
                return [c["chunk_id"] for c in data["chunk_metadata"]]

            async def mcp(q: str) -> list[str]:
                arguments = {"query": q, "knowledge_ids": ["building-ops"], "top_k": 5}
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "search", "arguments": arguments}}  # fmt: skip
                async with http.post(f"{url}/mcp", json=call) as resp:
                    assert resp.status == 200, await resp.text()
                    data = await resp.json()
                chunks = data["result"]["structuredContent"]["chunk_metadata"]
                return [c["chunk_id"] for c in chunks]

            items = [QUERIES[i % len(QUERIES)] for i in range(args.requests)]
            same = await drive(native, QUERIES, 1), await drive(mcp, QUERIES, 1)
            assert same[0].outputs == same[1].outputs, "MCP and /v1/search disagree"
            cpu: dict[str, list[float]] = {"v1_search": [], "mcp_search": []}
            latency: dict[str, Any] = {}
            for _ in range(args.rounds):
                for name, call in (("v1_search", native), ("mcp_search", mcp)):
                    before = cpu_seconds(child.pid)
                    done = await drive(call, items, 16)
                    cpu[name].append((cpu_seconds(child.pid) - before) * 1000 / len(items))
                    latency[name] = done.summary()
    median = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
    return {
        "requests_per_round": args.requests,
        "rounds": args.rounds,
        "cpu_ms_per_request": median,
        "cpu_ms_per_request_rounds": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
        "mcp_added_cpu_ms": round(median["mcp_search"] - median["v1_search"], 3),
        "latency_at_16": latency,
        "same_answers": True,
    }


def main() -> None:
    parser = harness_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=18093)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print_result(result, args.out)
    print(say("bench_mcp_cpu", ms=result["mcp_added_cpu_ms"]), file=sys.stderr)


if __name__ == "__main__":
    main()
