"""One benchmark run: index a synthetic corpus with the project's indexer, start the service
and a local 80 ms provider, then measure every scenario side by side.

    python -m bench.query                       # full: 100k chunks, 1,000 queries, RSS on 200 MB
    python -m bench.query --smoke               # CI: 2,000 chunks, 60 queries, < 2 minutes
    python -m bench.query --scales 10000,100000,1000000   # cost growth curve as well
    python -m bench.query --cluster             # plus raw and service on a local 3-node cluster
    python -m bench.query --separate-cores      # plus QPS with Elasticsearch on a core of its own
    python -m bench.query --hop                 # plus an HTTP hop that only forwards (the floor)
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

from bench.harness import CACHE, ROOT, machine
from bench.query import corpus, report
from bench.query.cluster import roles_scaling, three_nodes, write_policy
from bench.query.common import drop_alias, fresh_alias, index_corpus, own
from bench.query.cpu import CpuMeter, on_separate_cores
from bench.query.processes import Processes, peak_rss
from bench.query.rounds import BLOCKS, hop_floor, ids, measure, same_share, scenarios
from bench.query.scenarios import client_session, prepare, recall_at_k
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL
from retrieval_svc.filters import FieldCatalog
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings
from retrieval_svc.words import say


async def main(args: argparse.Namespace) -> dict[str, Any]:
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    alias = "rsvc-bench"
    es = make_es_client(ElasticsearchSettings(es_url=es_url), timeout_s=120)
    result: dict[str, Any] = {
        "chunks": args.chunks,
        "queries": args.queries,
        "machine": machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        workdir = CACHE / "run"
        scales = sorted({args.chunks, *args.scales})
        scaling = []
        for chunks in scales:
            print(say("bench_corpus", chunks=f"{chunks:,}"), file=sys.stderr)
            folder = corpus.write_corpus(CACHE, chunks)
            indexing = await index_corpus(es, alias, folder)
            print(say("bench_indexing", result=indexing), file=sys.stderr)
            mapping = await es.indices.get_mapping(index=own(alias))
            acl = AccessControl(DEFAULT_MODEL, write_policy(workdir))
            qs = list(corpus.queries(args.queries))
            prepared = prepare(qs, acl, FieldCatalog.from_mappings(dict(mapping)), corpus.TENANT)
            with Processes(es_url, alias, workdir, hop=args.hop) as procs:
                async with client_session(connections=64) as http:
                    scen = scenarios(http, es_url, procs, own(alias))
                    primary = chunks == args.chunks
                    concs = (1, 16)
                    cpu = CpuMeter(es, procs.service_pid)
                    # (the smoke's 60 queries in one block: each block costs a CPU reading, 1.1 s)
                    blocks = 1 if args.smoke else BLOCKS
                    measured, runs = await measure(
                        scen, prepared, concs, args.warmup, cpu, blocks=blocks
                    )
                    if args.separate_cores:
                        separate = await on_separate_cores(es, scen, prepared, procs)
                        result.setdefault("separate_cores", []).append(
                            {"chunks": chunks, **separate}
                        )
                    if args.hop:
                        floor = await hop_floor(es, scen, prepared, procs)
                        result.setdefault("hop", []).append({"chunks": chunks, **floor})
                    scaling.append(
                        {
                            "chunks": chunks,
                            "raw_p50_ms": measured["raw"]["1"]["p50_ms"],
                            "service_p50_ms": measured["service"]["1"]["p50_ms"],
                            "raw_qps16": measured["raw"]["16"]["qps"],
                            "service_qps16": measured["service"]["16"]["qps"],
                            "raw_cpu_ms": measured["raw"]["16"]["cpu_ms_per_request"],
                            "service_cpu_ms": measured["service"]["16"]["cpu_ms_per_request"],
                        }
                    )
                    if not primary:
                        continue
                    result["indexer"] = indexing
                    result["scenarios"] = measured
                    result["workaround_recall_at_10"] = recall_at_k(
                        ids(runs["service@1"]), ids(runs["workaround@1"])
                    )
                    result["raw_same_as_service"] = same_share(
                        ids(runs["raw@1"]), ids(runs["service@1"])
                    )
                    result["ratios"] = {
                        "service_over_raw_p50": round(
                            measured["service"]["1"]["p50_ms"] / measured["raw"]["1"]["p50_ms"], 3
                        ),
                        "service_over_raw_qps16": round(
                            measured["service"]["16"]["qps"] / measured["raw"]["16"]["qps"], 3
                        ),
                        "web_over_max80_service_p50": round(
                            measured["service_web"]["1"]["p50_ms"]
                            / max(80.0, measured["service"]["1"]["p50_ms"]),
                            3,
                        ),
                    }
                    result["roles"] = await roles_scaling(acl, prepared, scen)
            if chunks == args.chunks:
                primary_folder, primary_prepared = folder, prepared
        if len(scales) > 1:
            result["scaling"] = scaling
        if args.cluster:
            result["three_nodes"] = await three_nodes(args, primary_folder, primary_prepared)
        if args.rss_mb:
            print(say("bench_peak_rss", mb=args.rss_mb), file=sys.stderr)
            result["rss"] = peak_rss(es_url, alias, args.rss_mb)
    finally:
        await drop_alias(es, alias)
        await drop_alias(es, f"{alias}-rss")
        await es.close()
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--scales", default="", help="more corpus sizes for the cost curve")
    parser.add_argument("--rss-mb", type=int, default=200, help="0 skips the RSS measurement")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="small and quick, for CI")
    parser.add_argument(
        "--cluster", action="store_true", help="also measure raw and service on 3 local nodes"
    )
    parser.add_argument(
        "--separate-cores",
        action="store_true",
        help="also measure raw, service and Dify route at concurrency 16 with Elasticsearch "
        "on CPU 0 and the service and load generator on CPU 1",
    )
    parser.add_argument(
        "--hop",
        action="store_true",
        help="also measure bench/query/hop.py, an HTTP hop that only forwards the raw query: the "
        "most QPS any service in front of Elasticsearch reaches on these cores",
    )
    parser.add_argument(
        "--rss-only",
        action="store_true",
        help="only the RSS measurement, merged into --out's result.json",
    )
    args = parser.parse_args(argv)
    args.scales = [int(s) for s in args.scales.split(",") if s.strip()]
    if args.smoke:
        args.chunks, args.queries, args.warmup, args.rss_mb = 2000, 60, 10, 0
        args.scales = []
    return args


async def rss_only(args: argparse.Namespace) -> dict[str, Any]:
    """Re-measure RSS and merge it into an existing result."""
    assert args.out is not None, "--rss-only needs --out pointing at a previous run"
    result: dict[str, Any] = json.loads((args.out / "result.json").read_text("utf-8"))
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    es = make_es_client(ElasticsearchSettings(es_url=es_url), timeout_s=120)
    try:
        await fresh_alias(es, "rsvc-bench-rss")
        result["rss"] = peak_rss(es_url, "rsvc-bench", args.rss_mb)
    finally:
        await drop_alias(es, "rsvc-bench-rss")
        await es.close()
    return result


def main_cli() -> None:
    """``python -m bench.query``: run, keep the result and print its table."""
    options = parse()
    outcome = asyncio.run(rss_only(options) if options.rss_only else main(options))
    out = options.out or ROOT / "bench" / "results" / time.strftime("%Y%m%d-%H%M%S")
    report.write(outcome, out)
    print((out / "table.md").read_text("utf-8"))
    print(say("bench_results", out=out), file=sys.stderr)
