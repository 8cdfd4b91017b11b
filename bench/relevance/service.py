"""The relevance benchmark's service: indexing the corpus, and asking every question."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from elasticsearch import AsyncElasticsearch

from bench.harness import ROOT
from bench.harness.measure import drive
from bench.harness.service import memory_mb, start_service
from bench.relevance.data import ALIAS, DEPTH, KB, KEY, OWN, Question, doc_of, unique_docs
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import ObjectStoreOptions, open_source
from retrieval_svc.auth.keys import hash_key
from retrieval_svc.embedding import Embedder


class Service:
    """``retrieval-svc serve`` in a child process, with a trusted key and the local model."""

    def __init__(self, es_url: str, workdir: Path, port: int, cache_size: int) -> None:
        self.port = port
        keys = workdir / "keys.json"
        keys.write_text(
            json.dumps([{"name": "bench", "sha256": hash_key(KEY), "mode": "trusted"}]), "utf-8"
        )
        self.env = {
            **os.environ,
            "RSVC_ES_URL": es_url,
            "RSVC_INDEX_ALIAS": ALIAS,
            "RSVC_API_KEYS_FILE": str(keys),
            "RSVC_PORT": str(port),
            "RSVC_MANAGE_INDEX": "false",
            # Big enough for every question: the "repeated query" run must find them all.
            "RSVC_QUERY_CACHE_SIZE": str(cache_size),
        }
        self.log = open(workdir / "service.log", "w")
        self.child: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.child = start_service(
            env=self.env, port=self.port, log=self.log, timeout_s=120, cwd=ROOT
        )

    def rss_mb(self) -> dict[str, float]:
        """The service's resident memory now and at its peak (MB)."""
        assert self.child is not None
        return {k: round(v, 1) for k, v in memory_mb(self.child.pid).items()}

    def stop(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            self.child.wait(timeout=20)
        self.log.close()


async def index_corpus(
    es: AsyncElasticsearch, folder: Path, embedder: Embedder | None
) -> dict[str, Any]:
    """Index the folder through the project's indexer; throughput of the whole pipeline."""
    options = IndexOptions(knowledge_id=KB, alias=OWN, dataset_name="CMRC 2018 dev")
    source = open_source(str(folder), ObjectStoreOptions())
    report = await index_source(es, source, options, embedder=embedder)
    if not report.ok:
        raise RuntimeError(f"indexing failed: {report.failures[:3]}")
    return {
        "documents": report.documents_indexed,
        "chunks": report.chunks_indexed,
        "duration_s": report.duration_s,
        "embedding_s": report.embedding_s,
        "chunks_per_s": round(report.chunks_indexed / report.duration_s, 2),
    }


async def embedder_throughput(es: AsyncElasticsearch, embedder: Embedder, n: int) -> float:
    """The embedder alone on ``n`` of the indexed chunks, in the indexer's slice size."""
    hits = (await es.search(index=OWN, size=n, source_includes=["content"], sort=["_doc"]))["hits"][
        "hits"
    ]
    texts = [h["_source"]["content"] for h in hits]
    started = time.perf_counter()
    for i in range(0, len(texts), 64):
        await embedder.embed_passages(texts[i : i + 64])
    return round(len(texts) / (time.perf_counter() - started), 2)


async def ask(
    client: httpx.AsyncClient, question: Question, mode: str, roles: list[str]
) -> tuple[list[str], dict[str, Any]]:
    """One /v1/search call: the documents in rank order, and the answer's meta."""
    resp = await client.post(
        "/v1/search",
        json={
            "query": question.text,
            "knowledge_ids": [KB],
            "top_k": DEPTH,
            "mode": mode,
            "principal": {"roles": roles},
        },
    )
    resp.raise_for_status()
    body = resp.json()
    return unique_docs([doc_of(c) for c in body["chunk_metadata"]]), body["meta"]


async def run_mode(
    client: httpx.AsyncClient, questions: list[Question], mode: str, roles: list[str] | None
) -> dict[str, Any]:
    """Every question once at concurrency 1 (``roles`` None: each question's own role)."""

    async def call(q: Question) -> tuple[list[str], dict[str, Any]]:
        return await ask(client, q, mode, roles if roles is not None else [q.role])

    run = await drive(call, questions, 1)
    if run.errors:
        raise RuntimeError(f"{run.errors} requests failed in mode {mode}")
    rankings = [o[0] for o in run.outputs]
    modes = {o[1]["mode"] for o in run.outputs}
    return {"rankings": rankings, "latency": run.summary(), "ran_as": sorted(modes)}
