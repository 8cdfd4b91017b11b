"""Relevance benchmark: BM25, vector and hybrid retrieval on real Chinese data (CMRC 2018).

    python -m bench.relevance --data PATH/cmrc2018_dev.json [--limit N] [--queries N]

Every paragraph becomes one document (its access_roles drawn at random), indexed through the
project's indexer with the configured embedder (the local model by default); every question
asks the service's ``/v1/search`` (a real ``retrieval-svc serve`` process on loopback), and a
hit is the question's own paragraph. Reported per mode: nDCG@10, recall@10, MRR@10 and
latency at concurrency 1. Then:

* tuning: the raw BM25 and kNN lists of every question are fetched once and fused offline
  over a grid (method, vector weight, cosine floor); the table shows what each setting gives;
* a permission-aware run: each question is asked by a principal holding one random role, and
  the right answer is the unrestricted ranking restricted to the passages that principal may
  see. Pre-filtering (the ACL inside ``knn.filter``) must lose nothing against it; a kNN
  post-filter (top 10 first, then drop what is not visible) is shown beside it.

Results (JSON, Markdown, PNG) go to ``--out`` (default bench/results/relevance-<time>).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from elasticsearch import AsyncElasticsearch

from bench.harness import ROOT, parser
from bench.relevance.data import (
    ALIAS,
    DEFAULT_DATA,
    KEY,
    MODES,
    OWN,
    ROLES,
    load_cmrc,
    p50,
    scores,
    write_corpus,
)
from bench.relevance.report import markdown, plot, targets
from bench.relevance.service import Service, embedder_throughput, index_corpus, run_mode
from bench.relevance.tuning import permission_run, raw_lists, tune
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.embedding import embedder_config, make_embedder
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.settings import IndexSettings, Settings
from retrieval_svc.words import say


async def main(args: argparse.Namespace) -> dict[str, Any]:
    settings = IndexSettings(es_url=args.es_url, index_alias=ALIAS)
    paragraphs, questions = load_cmrc(args.data, args.limit, args.queries, args.seed)
    workdir = args.out / "work"
    write_corpus(workdir / "corpus", paragraphs, args.titles)
    said = say("relevance_read", paragraphs=len(paragraphs), questions=len(questions))
    print(said, file=sys.stderr)
    result: dict[str, Any] = {
        "data": "CMRC 2018 dev (" + args.data.name + ")",
        "paragraphs": len(paragraphs),
        "questions": len(questions),
        "machine": f"{os.cpu_count()} cores",
        "embedder": settings.embedder,
        "titles": args.titles,
    }
    es = AsyncElasticsearch(args.es_url, request_timeout=120)
    async with httpx.AsyncClient() as http:
        embedder = make_embedder(embedder_config(settings), http)
        if embedder is None:
            raise SystemExit(say("relevance_needs_embedder"))
        model = await embedder.describe()
        result["model"] = model.as_meta()
        try:
            await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
            await es.options(ignore_status=404).indices.delete_index_template(
                name=template_name(ALIAS)
            )
            await ensure_index(
                es,
                ALIAS,
                model,
                tenant=DEFAULT_TENANT,
                vector_index_type=settings.vector_index_type,
            )
            print(say("relevance_indexing"), file=sys.stderr)
            result["indexer"] = await index_corpus(es, workdir / "corpus", embedder)
            own = await embedder_throughput(es, embedder, min(128, result["indexer"]["chunks"]))
            result["indexer"]["embedder_alone_chunks_per_s"] = own
            result["indexer"]["ratio_to_embedder"] = round(
                result["indexer"]["chunks_per_s"] / own, 3
            )
            print(say("relevance_indexer", result=result["indexer"]), file=sys.stderr)

            relevant = [q.doc for q in questions]
            print(say("relevance_raw_lists"), file=sys.stderr)
            defaults = Settings(_env_file=None, auth_disabled=True)
            b, v, embed_ms, took = await raw_lists(
                es, embedder, questions, defaults.knn_num_candidates, defaults.knn_oversample
            )
            result["query_embedding_p50_ms"] = p50(embed_ms)
            result["tuning"] = tune(b, v, relevant, defaults.score_saturation)
            result["elasticsearch_took_p50_ms"] = took

            service = Service(args.es_url, workdir, args.port, len(questions) + 16)
            service.start()
            try:
                client = httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{args.port}",
                    timeout=60,
                    headers={"Authorization": f"Bearer {KEY}"},
                )
                async with client:
                    # Order matters for the latency targets: hybrid first with a cold query
                    # cache (embedding included), then vector and hybrid again with warm cache.
                    runs: dict[str, dict[str, Any]] = {}
                    runs["hybrid"] = await run_mode(client, questions, "hybrid", ROLES)
                    runs["vector"] = await run_mode(client, questions, "vector", ROLES)
                    runs["bm25"] = await run_mode(client, questions, "bm25", ROLES)
                    runs["hybrid_cached"] = await run_mode(client, questions, "hybrid", ROLES)
                    result["rss_mb"] = service.rss_mb()
                    restricted = {
                        m: (await run_mode(client, questions, m, None))["rankings"]
                        for m in ("vector", "hybrid")
                    }
                    # Indices merge as they age: the same questions after a merge to one
                    # segment (the kNN graph rebuilt over every vector at once; issue #25).
                    await es.indices.forcemerge(index=OWN, max_num_segments=1)
                    await es.indices.refresh(index=OWN)
                    merged = {m: await run_mode(client, questions, m, ROLES) for m in MODES}
            finally:
                service.stop()
        finally:
            await es.close()
    result["modes"] = {
        name: {**scores(r["rankings"], relevant), "latency": r["latency"], "ran_as": r["ran_as"]}
        for name, r in runs.items()
    }
    result["after_merge"] = {
        name: {**scores(r["rankings"], relevant), "ran_as": r["ran_as"]}
        for name, r in merged.items()
    }
    result["permission_aware"] = permission_run(
        questions, paragraphs, {m: runs[m]["rankings"] for m in MODES}, restricted
    )
    result["targets"] = targets(result)
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument(
        "--data", type=Path, default=Path(os.environ.get("RSVC_EVAL_CMRC", DEFAULT_DATA))
    )
    p.add_argument("--limit", type=int, default=None, help="paragraphs (default: all)")
    p.add_argument("--queries", type=int, default=None, help="questions (default: all)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--titles",
        action="store_true",
        help="give each paragraph its article title (the eval task is paragraph text alone)",
    )
    p.add_argument("--port", type=int, default=0, help="service port (default: a free one)")
    args = p.parse_args(argv)
    if not args.data.is_file():
        p.error(say("relevance_no_data", path=args.data))
    if not args.port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            args.port = int(sock.getsockname()[1])
    args.out = args.out or ROOT / "bench" / "results" / time.strftime("relevance-%Y%m%d-%H%M%S")
    return args


def cli(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(main(args))
    (args.out / "result.json").write_text(json.dumps(result, ensure_ascii=False, indent=2), "utf-8")
    (args.out / "table.md").write_text(markdown(result), "utf-8")
    plot(result, args.out / "relevance.png")
    print(markdown(result))
    print(say("bench_results", out=args.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
