"""Hybrid search at scale (issue #25 §1–§2): BM25 and hybrid, through the service and raw, on a
corpus with vectors; then kNN recall against exact search under selective permissions.

    python -m bench.hybrid --chunks 100000 --out bench/results/hybrid-100k
    python -m bench.hybrid --chunks 1000000 --keep --out bench/results/hybrid-1m
    python -m bench.hybrid --smoke           # CI: 2,000 chunks; fails below its targets
    python -m bench.hybrid …           # the same, from the cost benchmark's command

The corpus is ``bench.hybrid.corpus`` (the cost benchmark's chunks over 20 knowledge bases,
with selectivity roles); its vectors are ``bench.query.vectors`` (real for the first ``--real``
chunks, generated from them beyond). The index (``bench.hybrid.index``) is built by a bare
bulk of the finished chunks, vectors included, into the service's own template: its rate is
Elasticsearch's indexing rate with vectors. ``--keep`` leaves the index for a later
``--reuse``; ``--merge`` and ``--delete`` put it in the states an index reaches with use.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from elasticsearch import AsyncElasticsearch

from bench.harness import CACHE, ROOT, machine
from bench.harness.measure import drive
from bench.hybrid import report as hybrid_report
from bench.hybrid.corpus import ALL, EVERYONE, KNOWLEDGE_BASES
from bench.hybrid.index import Corpus, build, delete, footprint, hybrid_texts, merge
from bench.hybrid.scenarios import Ask, HybridScenarios, same_share, service_defaults
from bench.query import corpus, vectors
from bench.query.cluster import write_policy
from bench.query.common import KEY, drop_alias, own
from bench.query.cpu import CpuMeter
from bench.query.processes import Processes
from bench.query.rounds import ids, measure
from bench.query.scenarios import client_session
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL
from retrieval_svc.embedding.local import LocalEmbedder
from retrieval_svc.filters import FieldCatalog, compile_filter, parse_filter
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings
from retrieval_svc.words import say

ALIAS = "rsvc-hybrid"  # a run of N chunks uses rsvc-hybrid-N: a kept index outlives other sizes
QUERY_VECTORS = 1000  # the queries embedded (and cached) once; a run asks the first ones
NAMES = ("raw_bm25", "service_bm25", "raw_hybrid", "service_hybrid")
#: (label, the principal's one role, knowledge bases asked or None for all of them)
SELECTIVE: tuple[tuple[str, str, list[str] | None], ...] = (
    ("100%", ALL, None),
    ("50%", "sel50", None),
    ("10%", "sel10", None),
    ("1%", "sel1", None),
    ("0.1%", "sel0_1", None),
    ("one KB of 20", ALL, [KNOWLEDGE_BASES[7]]),
)


def asks(n: int, qv: np.ndarray, acl: AccessControl, catalog: FieldCatalog) -> list[Ask]:
    """The cost benchmark's mixed queries over every knowledge base, their principals holding
    ``全员`` too (what the BM25 benchmark made public)."""
    qs = list(corpus.queries(n))
    assert n <= len(qv), f"at most {len(qv)} queries have vectors"
    out = []
    for i, q in enumerate(qs):
        roles = [*q.roles, EVERYONE]
        compiled = [compile_filter(parse_filter(q.filter), catalog)] if q.filter else []
        effective = acl.expand(roles, corpus.TENANT)
        out.append(Ask(q.text, roles, effective, qv[i], filter=q.filter, compiled=compiled))
    return out


async def embedding_cost(texts: list[str]) -> dict[str, float]:
    """The bundled model embedding one query at a time, in process (what an uncached query
    adds; a cached one is a dictionary lookup)."""
    model = LocalEmbedder()
    model.load()
    times: list[float] = []
    for text in texts:
        started = time.perf_counter()
        await model.embed_queries([f"{text} {len(times)}"])  # never cached
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "n": len(times),
        "p50_ms": round(times[len(times) // 2], 2),
        "p95_ms": round(times[int(len(times) * 0.95)], 2),
    }


async def selective(
    scen: HybridScenarios, data: Corpus, base: list[Ask], sweep: list[int]
) -> list[dict[str, Any]]:
    """Recall@10 of the service's vector search against exact search over what the principal
    sees, latency, and what Elasticsearch did, for each selectivity."""
    rows_out = []
    for label, role, kbs in SELECTIVE:
        visible = data.layout.visible(role, kbs, data.deleted)
        group = [
            Ask(a.text, [role], frozenset({role}), a.vector, knowledge_ids=kbs or KNOWLEDGE_BASES)
            for a in base
        ]
        exact = vectors.exact_top(data.vectors, visible, np.stack([a.vector for a in group]))
        vec = await drive(scen.service_vector, group, 1)
        hyb = await drive(scen.service_hybrid, group, 1)
        raw = await drive(scen.raw_hybrid, group, 1)
        ops = [await scen.profile(a) for a in group[:10]]
        row: dict[str, Any] = {
            "selectivity": label,
            "visible": len(visible),
            "recall_at_10": recall(data, ids(vec), exact),
            "vector_p50_ms": vec.summary().get("p50_ms"),
            "vector_p99_ms": vec.summary().get("p99_ms"),
            "hybrid_p50_ms": hyb.summary().get("p50_ms"),
            "hybrid_p99_ms": hyb.summary().get("p99_ms"),
            "raw_hybrid_p50_ms": raw.summary().get("p50_ms"),
            "errors": vec.errors + hyb.errors + raw.errors,
            "failures": vec.failures + hyb.failures + raw.failures,
            "hybrid_same_as_raw": same_share(ids(hyb), ids(raw)),
            "vector_ops_median": int(statistics.median(ops)),
        }
        row["search"] = "exact" if row["vector_ops_median"] >= 0.9 * len(visible) else "graph"
        for nc in sweep:
            got = await drive(functools.partial(scen.raw_knn, num_candidates=nc), group, 1)
            row[f"recall_nc{nc}"] = recall(data, ids(got), exact)
            row[f"p50_ms_nc{nc}"] = got.summary().get("p50_ms")  # raw kNN alone
        rows_out.append(row)
        print(say("bench_selectivity", row=row), file=sys.stderr)
    return rows_out


async def mixed_scenarios(
    scen: HybridScenarios,
    es: AsyncElasticsearch,
    procs: Processes,
    mixed: list[Ask],
    warmup: int,
    result: dict[str, Any],
) -> None:
    """BM25 and hybrid, raw and through the service, at concurrency 1 and 16, into ``result``."""
    cpu = CpuMeter(es, procs.service_pid)
    measured, runs = await measure(scen, mixed, (1, 16), warmup, cpu, NAMES)
    result["scenarios"] = measured
    result["same_answers"] = {
        "bm25": same_share(ids(runs["raw_bm25@1"]), ids(runs["service_bm25@1"])),
        "hybrid": same_share(ids(runs["raw_hybrid@1"]), ids(runs["service_hybrid@1"])),
        # The same raw requests twice: Elasticsearch searches segments side by side and they
        # share what they found, so an approximate kNN answer can vary.
        "hybrid_raw_repeated": same_share(ids(runs["raw_hybrid@1"]), ids(runs["raw_hybrid@16"])),
    }


def recall(data: Corpus, got: list[list[str]], exact: list[list[int]]) -> float:
    shares = []
    for have, want in zip(got, exact, strict=True):
        rows = {data.rows.get(i, -1) for i in have}
        shares.append(len(rows & set(want)) / max(len(want), 1))
    return round(sum(shares) / max(len(shares), 1), 4)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    es = make_es_client(ElasticsearchSettings(es_url=es_url), timeout_s=600)
    config, saturation = service_defaults()
    alias = f"{ALIAS}-{args.chunks}"
    if args.num_candidates:  # the service and the raw side alike
        config = dataclasses.replace(config, num_candidates=args.num_candidates)
        os.environ["RSVC_KNN_NUM_CANDIDATES"] = str(args.num_candidates)
    tag = f"{args.index_type}-{'gen' if args.check_generated else 'real'}-{args.real}"
    result: dict[str, Any] = {
        "chunks": args.chunks,
        "real_vectors": args.real,
        "queries": args.queries,
        "machine": machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "service_knn": {
            "k": max(10, config.candidates),
            "num_candidates": config.num_candidates,
            "oversample": config.oversample,
            "fusion": config.fusion,
        },
    }
    try:
        sample = await vectors.embed(hybrid_texts(args.real), CACHE / "vectors")
        texts = [q.text for q in corpus.queries(QUERY_VECTORS)]
        qv = await vectors.embed(texts, CACHE / "vectors", queries=True)
        data = Corpus(args.chunks, sample, check_generated=args.check_generated)
        print(say("bench_corpus_tagged", chunks=f"{args.chunks:,}", tag=tag), file=sys.stderr)
        result["indexing"] = await build(
            es, alias, data, args.index_type, reuse=args.reuse, tag=tag
        )
        if args.merge:
            result["indexing"]["forcemerge_s"] = await merge(es, alias)
        if args.delete:
            result["indexing"]["deleted"] = await delete(es, alias, data, args.delete)
        mapping = await es.indices.get_mapping(index=own(alias))
        acl = AccessControl(DEFAULT_MODEL, write_policy(CACHE / "hybrid"))
        mixed = asks(args.queries, qv, acl, FieldCatalog.from_mappings(dict(mapping)))
        result["query_embedding"] = await embedding_cost([a.text for a in mixed[:50]])
        with Processes(es_url, alias, CACHE / "hybrid", embedder="local") as procs:
            async with client_session(connections=64) as http:
                scen = HybridScenarios(
                    http,
                    es_url=es_url,
                    service_url=procs.url,
                    key=KEY,
                    alias=own(alias),
                    config=config,
                    saturation=saturation,
                )
                await drive(scen.service_hybrid, mixed, 2)  # the service's query-vector cache
                if not args.selectivity_only:
                    await mixed_scenarios(scen, es, procs, mixed, args.warmup, result)
                base = mixed[: args.selective_queries]
                result["selectivity"] = await selective(scen, data, base, args.sweep)
        result["footprint"] = await footprint(es, alias)  # after the queries: heap as it runs
    finally:
        if not args.keep:
            await drop_alias(es, alias)
        await es.close()
    result["targets"] = hybrid_report.targets(result)
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--real", type=int, default=10_000, help="chunks with real vectors")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--selective-queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--index-type", default="int8_hnsw")
    parser.add_argument(
        "--sweep", default="", help="num_candidates values to try raw, e.g. 100,500"
    )
    parser.add_argument(
        "--num-candidates", type=int, default=0, help="the service's kNN num_candidates"
    )
    parser.add_argument(
        "--selectivity-only", action="store_true", help="skip the mixed-query scenarios"
    )
    parser.add_argument("--merge", action="store_true", help="force-merge to one segment first")
    parser.add_argument(
        "--delete",
        type=float,
        default=0.0,
        help="delete this share of the chunks after the build (and merge), e.g. 0.1",
    )
    parser.add_argument("--keep", action="store_true", help="leave the index for --reuse")
    parser.add_argument("--reuse", action="store_true", help="use a kept index of this size")
    parser.add_argument(
        "--check-generated",
        action="store_true",
        help="generate every vector from a tenth of the real sample (compare with a real run)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="small and quick, for CI")
    args = parser.parse_args(argv)
    args.sweep = [int(s) for s in args.sweep.split(",") if s.strip()]
    if args.smoke:
        args.chunks, args.real, args.queries, args.selective_queries = 2000, 300, 60, 30
        args.warmup = 10
        args.merge = True  # one segment: kNN answers are deterministic, and merged is the hard case
    return args


def run(argv: list[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(main(args))
    out = args.out or ROOT / "bench" / "results" / time.strftime("hybrid-%Y%m%d-%H%M%S")
    hybrid_report.write(result, out)
    print((out / "table.md").read_text("utf-8"))
    print(say("bench_results", out=out), file=sys.stderr)
    missed = [t["target"] for t in result["targets"] if not t["met"] and t.get("gate")]
    if args.smoke and missed:
        print(say("bench_hybrid_missed", missed=missed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run())
