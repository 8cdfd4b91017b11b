"""The processes of a cost run.

The service (and the forward-only hop) on loopback, and the indexer child whose
peak memory is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import CACHE, ROOT
from bench.harness.service import memory_mb, start_service
from bench.query import corpus
from bench.query.common import KEY, own
from bench.query.scenarios import TEXT_FIELDS
from retrieval_svc.auth.keys import hash_key


def peak_rss(es_url: str, alias: str, megabytes: int) -> dict[str, Any]:
    """Index ~``megabytes`` of Markdown with the CLI in a child process; that child's peak RSS.

    The peak is the child's own high-water mark (``VmHWM`` in /proc), sampled while it runs:
    ``getrusage(RUSAGE_CHILDREN)`` would report the largest of *all* finished children.
    """
    chunks = int(megabytes * 1024 * 1024 / 400)  # ≈400 bytes of Markdown per chunk
    folder = corpus.write_corpus(CACHE, chunks, seed=3)
    size = sum(p.stat().st_size for p in folder.rglob("*.md"))
    env = {
        **os.environ,
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": f"{alias}-rss",
        "RSVC_EMBEDDER": "none",  # the BM25 cost benchmark (bench.relevance measures hybrid)
    }
    base = [sys.executable, "-c", "from indexer.cli import app; app()"]
    started = time.perf_counter()
    child = subprocess.Popen(
        [*base, "index", str(folder), "--knowledge-id", "rss", "--json", "--concurrency", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0.0
    while child.poll() is None:
        try:
            peak = max(peak, memory_mb(child.pid)["VmHWM"])
        except (FileNotFoundError, ProcessLookupError, KeyError):  # exited meanwhile
            break
        time.sleep(0.1)
    stdout, stderr = child.communicate()
    elapsed = time.perf_counter() - started
    if child.returncode != 0:
        raise RuntimeError(f"indexer failed: {stderr[-2000:]}")
    out = json.loads(stdout)
    subprocess.run(
        [*base, "delete", "--knowledge-id", "rss", "--yes"],
        env=env,
        capture_output=True,
        check=False,
    )
    return {
        "input_mb": round(size / 2**20),
        "peak_mb": round(peak),
        "chunks": out["chunks_indexed"],
        "documents": out["documents_indexed"],
        "seconds": round(elapsed, 1),
    }


class Processes:
    """The service and the fake provider (and, with ``hop``, bench/query/hop.py) as child processes
    on loopback."""

    def __init__(
        self, es_url: str, alias: str, workdir: Path, *, hop: bool = False, embedder: str = "none"
    ) -> None:
        self.port, self.provider_port, self.hop_port = 18080, 18099, 18081
        self.hop, self.alias = hop, alias
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "policy.csv").write_text(corpus.policy_text(), "utf-8")
        (workdir / "keys.json").write_text(
            json.dumps(
                [
                    {
                        "name": "bench",
                        "sha256": hash_key(KEY),
                        "tenant": corpus.TENANT,
                        "mode": "trusted",
                    }
                ]
            )
        )
        self.env = {
            **os.environ,
            "RSVC_ES_URL": es_url,
            "RSVC_INDEX_ALIAS": alias,
            "RSVC_API_KEYS_FILE": str(workdir / "keys.json"),
            "RSVC_CASBIN_POLICY": str(workdir / "policy.csv"),
            "RSVC_WEB_PROVIDER": "tavily",
            "RSVC_WEB_API_KEY": "bench-provider-key",
            "RSVC_WEB_BASE_URL": f"http://127.0.0.1:{self.provider_port}",
            "RSVC_WEB_CACHE_TTL_S": "0",
            "RSVC_WEB_TIMEOUT_S": "2",
            "RSVC_PORT": str(self.port),
            "RSVC_MANAGE_INDEX": "false",
            # none: the BM25 cost benchmark; local: bench.hybrid's
            "RSVC_EMBEDDER": embedder,
            "RSVC_BM25_FIELDS": TEXT_FIELDS,  # the query the raw scenarios send
        }
        self.url = f"http://127.0.0.1:{self.port}"
        self.hop_url = f"http://127.0.0.1:{self.hop_port}" if hop else None
        self.log = open(workdir / "service.log", "w")
        self.children: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Processes:
        self.children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.harness.fake_provider",
                    "--port",
                    str(self.provider_port),
                ],
                cwd=ROOT,
                stdout=self.log,
                stderr=self.log,
            )
        )
        try:
            self.children.append(
                start_service(env=self.env, port=self.port, log=self.log, timeout_s=30, cwd=ROOT)
            )
            if self.hop:
                self.children.append(
                    start_service(
                        *("--port", str(self.hop_port), "--alias", own(self.alias)),
                        command=[sys.executable, "-m", "bench.query.hop"],
                        env=self.env,
                        port=self.hop_port,
                        log=self.log,
                        timeout_s=30,
                        cwd=ROOT,
                    )
                )
        except RuntimeError:
            self.__exit__()
            raise
        return self

    @property
    def service_pid(self) -> int:
        return self.children[1].pid

    @property
    def hop_pid(self) -> int:
        assert self.hop, "started without the hop"
        return self.children[2].pid

    def __exit__(self, *exc: object) -> None:
        for child in self.children:
            child.terminate()
        for child in self.children:
            child.wait(timeout=10)
        self.log.close()


def service_client(port: int, connections: int) -> httpx.AsyncClient:
    """A keep-alive client for the service on loopback, authenticated with the bench key."""
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        timeout=30,
        headers={"Authorization": f"Bearer {KEY}"},
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )
