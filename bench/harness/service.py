"""Child processes of the harnesses: ``retrieval-svc serve`` started until ready, and what
``/proc`` says a process costs (memory, CPU)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from elasticsearch import AsyncElasticsearch

SERVE = (sys.executable, "-c", "from retrieval_svc.cli import app; app()", "serve")


def start_service(
    *args: str,
    env: dict[str, str],
    port: int,
    log: IO[str],
    timeout_s: float,
    cwd: Path | None = None,
    command: Sequence[str] = SERVE,
) -> subprocess.Popen[bytes]:
    """``retrieval-svc serve ARGS`` (or ``command ARGS``) as a child writing to ``log``,
    returned once its ``/readyz`` on ``port`` answers 200. A child that exits, or is not
    ready within ``timeout_s``, is stopped and RuntimeError carries the end of its log."""
    argv = [*command, *args]
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        # Something answers there already: its /readyz would pass for ours.
        raise RuntimeError(
            f"port {port} is in use (another benchmark running?): {shlex.join(argv)}"
        )
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=log)
    deadline = time.monotonic() + timeout_s
    while child.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return child
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    child.terminate()
    child.wait(timeout=10)
    log.flush()
    tail = Path(log.name).read_text("utf-8", errors="replace")[-2000:]
    raise RuntimeError(f"{shlex.join(argv)} did not become ready ({log.name}):\n{tail}")


def memory_mb(pid: int) -> dict[str, float]:
    """A process's resident memory now (``VmRSS``) and at its peak (``VmHWM``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def index_sample(es: AsyncElasticsearch, alias: str, tenant: str) -> None:
    """The sample corpus (``samples/building-ops``) indexed for ``tenant`` under ``alias``,
    its index made first (the benchmarks delete what the alias held before)."""
    from indexer.pipeline import IndexOptions, index_source
    from indexer.sources import LocalSource
    from retrieval_svc.search.index import ensure_index
    from retrieval_svc.tenancy import tenant_alias

    await ensure_index(es, alias, tenant=tenant)
    samples = Path(__file__).resolve().parents[2] / "samples" / "building-ops"
    options = IndexOptions("building-ops", tenant_alias(alias, tenant), tenant=tenant)
    await index_source(es, LocalSource(samples), options)


@contextlib.asynccontextmanager
async def sample_service(
    es_url: str, port: int, alias: str, key: str, env: dict[str, str] | None = None
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """The sample corpus in tenant ``bench`` under a private ``alias``, and a one-process
    ``retrieval-svc serve`` on it (BM25, a key of that tenant, ``env`` on top); both gone
    after."""
    from elasticsearch import AsyncElasticsearch

    from retrieval_svc.auth.keys import hash_key

    tenant = "bench"
    es = AsyncElasticsearch(es_url, request_timeout=120)
    await es.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-audit.*")
    await index_sample(es, alias, tenant)
    work = Path(tempfile.mkdtemp(prefix="rsvc-bench-"))
    keys = work / "keys.json"
    keys.write_text(json.dumps([{"name": "b", "sha256": hash_key(key), "tenant": tenant}]))
    child_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RSVC_")},
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_EMBEDDER": "none",
        **(env or {}),
    }
    with (work / "serve.log").open("w") as log:
        child = start_service("--port", str(port), env=child_env, port=port, log=log,
                              timeout_s=180)  # fmt: skip
        try:
            yield child
        finally:
            child.terminate()
            child.wait(timeout=60)
            await es.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-audit.*")
            await es.close()
