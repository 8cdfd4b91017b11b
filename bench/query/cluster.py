"""The three-node run and the roles-scaling run of the cost benchmark."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import CACHE, ROOT
from bench.harness.measure import drive
from bench.query import corpus
from bench.query.common import drop_alias, fresh_alias, own
from bench.query.cpu import CpuMeter
from bench.query.processes import Processes
from bench.query.rounds import measure, scenarios
from bench.query.scenarios import Prepared, Scenarios, client_session
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings
from retrieval_svc.words import say

CLUSTER_SCRIPT = ROOT / "scripts" / "es-cluster.sh"


async def three_nodes(
    args: argparse.Namespace, folder: Path, prepared: list[Prepared]
) -> dict[str, Any]:
    """Raw Elasticsearch and the service on a local three-node cluster (one replica, three
    shards), the same corpus and queries: p50 at concurrency 1, QPS at 16. The cluster is
    RSVC_ES_CLUSTER_URLS if set, else started here with scripts/es-cluster.sh (and stopped)."""
    urls = os.environ.get("RSVC_ES_CLUSTER_URLS", "")
    started = not urls
    if started:
        print(say("bench_three_nodes"), file=sys.stderr)
        urls = subprocess.run(
            [str(CLUSTER_SCRIPT), "start"], capture_output=True, text=True, check=True, timeout=900
        ).stdout.strip()
    alias = "rsvc-bench-3n"
    es = make_es_client(ElasticsearchSettings(es_url=urls), timeout_s=120)
    try:
        options = IndexOptions(
            knowledge_id=corpus.KNOWLEDGE_ID,
            alias=await fresh_alias(es, alias, shards=3, replicas="1"),
            tenant=corpus.TENANT,
            concurrency=2,
        )
        rep = await index_source(es, LocalSource(folder), options)
        assert rep.ok, rep.failures[:3]
        await es.cluster.health(index=own(alias), wait_for_status="green", timeout="300s")
        with Processes(urls, alias, CACHE / "run-3n") as procs:
            async with client_session(connections=64) as http:
                scen = scenarios(http, urls, procs, own(alias))
                cpu = CpuMeter(es, procs.service_pid)
                measured, _ = await measure(
                    scen, prepared, (1, 16), args.warmup, cpu, names=("raw", "service")
                )
        return {
            "nodes": 3,
            "shards": 3,
            "replicas": 1,
            "raw_p50_ms": measured["raw"]["1"]["p50_ms"],
            "service_p50_ms": measured["service"]["1"]["p50_ms"],
            "raw_qps16": measured["raw"]["16"]["qps"],
            "service_qps16": measured["service"]["16"]["qps"],
            "scenarios": measured,
        }
    finally:
        await drop_alias(es, alias)
        await es.close()
        if started:
            subprocess.run([str(CLUSTER_SCRIPT), "stop"], capture_output=True, timeout=300)


def write_policy(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "policy.csv"
    path.write_text(corpus.policy_text(), "utf-8")
    return path


async def roles_scaling(
    acl: AccessControl, prepared: list[Prepared], scen: Scenarios
) -> dict[str, Any]:
    """The same queries asserting 10 and 1,000 roles (most unknown to the corpus)."""
    out: dict[str, Any] = {}
    sample = prepared[: min(len(prepared), 200)]
    for count in (10, 1000):
        extra = [f"外部角色{i:04d}" for i in range(count)]
        runs = [
            Prepared(
                corpus.Query(
                    p.query.text,
                    (p.query.roles + extra)[:count],
                    p.query.filter,
                    p.query.kind,
                    p.query.dify_conditions,
                ),
                acl.expand((p.query.roles + extra)[:count], corpus.TENANT),
                p.filters,
            )
            for p in sample
        ]
        run = await drive(scen.service, runs, 1)
        out[str(count)] = run.summary()
    return out
