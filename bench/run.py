"""One benchmark run: index a synthetic corpus with the project's indexer, start the service
and a local 80 ms provider, then measure every scenario side by side.

    python -m bench.run                       # full: 100k chunks, 1,000 queries, RSS on 200 MB
    python -m bench.run --smoke               # CI: 2,000 chunks, 60 queries, < 2 minutes
    python -m bench.run --scales 10000,100000,1000000   # cost growth curve as well
    python -m bench.run --cluster             # plus raw and service on a local 3-node cluster
    python -m bench.run --separate-cores      # plus QPS with Elasticsearch on a core of its own
    python -m bench.run --hop                 # plus an HTTP hop that only forwards (the floor)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk

from bench import corpus, report
from bench.measure import Run, drive
from bench.scenarios import TEXT_FIELDS, Prepared, Scenarios, client_session, prepare, recall_at_k
from bench.service import cpu_seconds, memory_mb, start_service
from indexer.pipeline import IndexOptions, index_source, load_document
from indexer.sources import LocalSource
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL
from retrieval_svc.auth.keys import hash_key
from retrieval_svc.filters import FieldCatalog
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.settings import ElasticsearchSettings
from retrieval_svc.tenancy import tenant_alias

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
KEY = "bench-key-0123456789abcdef"
SCENARIOS = ("raw", "service", "dify", "service_web", "workaround")


def machine() -> str:
    cpus = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {cpus} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def own(alias: str) -> str:
    """The bench tenant's alias under ``alias`` (each tenant has its own index)."""
    return tenant_alias(alias, corpus.TENANT)


async def fresh_alias(es: AsyncElasticsearch, alias: str, **layout: Any) -> str:
    """The bench tenant's index under ``alias``, new and empty; its alias."""
    await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
    await ensure_index(es, alias, tenant=corpus.TENANT, **layout)
    return own(alias)


async def drop_alias(es: AsyncElasticsearch, alias: str) -> None:
    await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
    await es.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))


async def index_corpus(es: AsyncElasticsearch, alias: str, folder: Path) -> dict[str, Any]:
    """The CLI's pipeline vs a bare async_streaming_bulk of the same chunks."""
    options = IndexOptions(
        knowledge_id=corpus.KNOWLEDGE_ID,
        alias=await fresh_alias(es, alias),
        tenant=corpus.TENANT,
        concurrency=2,
    )
    started = time.perf_counter()
    rep = await index_source(es, LocalSource(folder), options)
    cli_s = time.perf_counter() - started
    assert rep.ok, rep.failures[:3]
    # The same chunks, built beforehand, then one bare bulk into a throwaway index.
    source = LocalSource(folder)
    chunks = [c for ref in source.list() for c in load_document(source, ref, options)]
    bare = f"{alias}-bare"
    bare_own = await fresh_alias(es, bare)
    started = time.perf_counter()
    actions = ({"_index": bare_own, "_id": c["chunk_id"], "_source": c} for c in chunks)
    async for ok, _ in async_streaming_bulk(
        es,
        actions,
        chunk_size=500,
        max_chunk_bytes=10 * 1024 * 1024,
        max_retries=5,
        retry_on_status=(429,),
        raise_on_error=False,
    ):
        assert ok
    await es.indices.refresh(index=bare_own)
    bare_s = time.perf_counter() - started
    await drop_alias(es, bare)
    n = rep.chunks_indexed
    return {
        "chunks": n,
        "cli_s": round(cli_s, 2),
        "bare_s": round(bare_s, 2),
        "cli_chunks_per_s": round(n / cli_s),
        "bare_chunks_per_s": round(n / bare_s),
        "ratio": round(bare_s / cli_s, 3),
    }


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
    """The service and the fake provider (and, with ``hop``, bench/hop.py) as child processes
    on loopback."""

    def __init__(self, es_url: str, alias: str, workdir: Path, *, hop: bool = False) -> None:
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
            "RSVC_EMBEDDER": "none",  # the BM25 cost benchmark (bench.relevance measures hybrid)
            "RSVC_BM25_FIELDS": TEXT_FIELDS,  # the query the raw scenarios send
        }
        self.url = f"http://127.0.0.1:{self.port}"
        self.hop_url = f"http://127.0.0.1:{self.hop_port}" if hop else None
        self.log = open(workdir / "service.log", "w")
        self.children: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Processes:
        self.children.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.fake_provider", "--port", str(self.provider_port)],
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
                        command=[sys.executable, "-m", "bench.hop"],
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


def ids(run: Run) -> list[list[str]]:
    """The chunk ids each call returned (empty where it failed)."""
    return [list(o[0]) if o else [] for o in run.outputs]


def service_client(port: int, connections: int) -> httpx.AsyncClient:
    """A keep-alive client for the service on loopback, authenticated with the bench key."""
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        timeout=30,
        headers={"Authorization": f"Bearer {KEY}"},
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def same_share(a: list[list[str]], b: list[list[str]]) -> float:
    """Share of queries answered with exactly the same chunk ids in the same order: 1.0 when
    the raw scenario sends the service's query (a check on the comparison itself)."""
    return round(sum(x == y for x, y in zip(a, b, strict=True)) / max(len(a), 1), 4)


def scenarios(http: aiohttp.ClientSession, es_url: str, procs: Processes, alias: str) -> Scenarios:
    """The scenarios against these Elasticsearch nodes (comma-separated) and this service."""
    nodes = [u.strip() for u in es_url.split(",") if u.strip()]
    return Scenarios(
        http, es_urls=nodes, service_url=procs.url, key=KEY, alias=alias, hop_url=procs.hop_url
    )


class CpuMeter:
    """CPU time used by Elasticsearch (every node, from ``_nodes/stats``), the service process
    (``/proc``) and this load generator between two readings: on a machine whose cores all
    three share, what each costs per request decides the throughput ratio.

    Elasticsearch caches its process stats for ``monitor.process.refresh_interval`` (1 s), so
    a reading first waits that long; the idle second after a run is counted against the run
    (Elasticsearch idles at a few ms of CPU per second).
    """

    ES_STATS_CACHE_S = 1.1

    def __init__(self, es: AsyncElasticsearch, service_pid: int) -> None:
        self.es, self.service_pid = es, service_pid

    async def read(self) -> tuple[float, float, float]:
        """(Elasticsearch, service, load generator) CPU seconds so far."""
        await asyncio.sleep(self.ES_STATS_CACHE_S)
        stats = await self.es.nodes.stats(metric="process")
        es_s = sum(n["process"]["cpu"]["total_in_millis"] for n in stats["nodes"].values()) / 1000
        return es_s, cpu_seconds(self.service_pid), time.process_time()

    @staticmethod
    def per_request(
        before: tuple[float, ...], after: tuple[float, ...], n: int
    ) -> dict[str, float]:
        """Milliseconds of CPU per request of each part."""
        parts = ("elasticsearch", "service", "load_generator")
        return {
            k: round((b - a) * 1000 / max(n, 1), 3)
            for k, a, b in zip(parts, before, after, strict=True)
        }


class SeparateCores:
    """Elasticsearch on CPU 0; the service and the load generator on CPU 1 (``--separate-cores``).

    On a machine whose cores all three share, the service/raw QPS ratio is a CPU budget: every
    millisecond the service spends is one Elasticsearch does not get. Where they do not share
    (Elasticsearch on its own nodes, the service in its own pod with its CPU limit), the ratio
    is about what the service adds per request instead. Elasticsearch gets the same one core
    for raw and service, so the comparison stays like for like.
    """

    def __init__(self, es_pid: int, pids: list[int]) -> None:
        if len(os.sched_getaffinity(0)) < 2:
            raise SystemExit("--separate-cores needs at least 2 CPUs")
        self.es_pid, self.pids = es_pid, pids
        self.saved = os.sched_getaffinity(0)

    @staticmethod
    def pin(pid: int, cpus: set[int]) -> None:
        """Every thread of ``pid`` (threads it starts later inherit it)."""
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except ProcessLookupError:  # a thread that ended meanwhile
                pass

    def __enter__(self) -> SeparateCores:
        self.pin(self.es_pid, {0})
        for pid in [os.getpid(), *self.pids]:
            self.pin(pid, {1})
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in [self.es_pid, os.getpid(), *self.pids]:
            if Path(f"/proc/{pid}").exists():
                self.pin(pid, self.saved)


async def local_es_pid(es: AsyncElasticsearch) -> int:
    """The process id of the one local Elasticsearch node (to pin it)."""
    info = await es.nodes.info(metric="process")
    pids = [int(n["process"]["id"]) for n in info["nodes"].values()]
    if len(pids) != 1 or not Path(f"/proc/{pids[0]}").exists():
        raise SystemExit("--separate-cores needs one Elasticsearch node on this machine")
    return pids[0]


async def on_separate_cores(
    es: AsyncElasticsearch, scen: Scenarios, prepared: list[Prepared], procs: Processes
) -> dict[str, Any]:
    """Raw, service and Dify route at concurrency 16 with Elasticsearch on its own core."""
    out: dict[str, Any] = {}
    with SeparateCores(await local_es_pid(es), [c.pid for c in procs.children]):
        for name in ("raw", "service", "dify"):
            await drive(getattr(scen, name), prepared[:50], 4)  # settle on the new cores
            out[name] = (await drive(getattr(scen, name), prepared, 16)).summary()
            print(f"  {name:12s} c=16  separate cores {out[name]}", file=sys.stderr)
    return out


async def hop_floor(
    es: AsyncElasticsearch, scen: Scenarios, prepared: list[Prepared], procs: Processes
) -> dict[str, Any]:
    """Raw, bench/hop.py and the service at concurrency 16 on the shared cores, each with the
    CPU per request of the process in between (none for raw): what forwarding alone costs."""
    out: dict[str, Any] = {}
    runs: dict[str, Run] = {}
    between = {"raw": procs.service_pid, "hop": procs.hop_pid, "service": procs.service_pid}
    for name in between:
        await drive(getattr(scen, name), prepared[:50], 4)  # warm its connections
    for name, pid in between.items():
        cpu = CpuMeter(es, pid)
        before = await cpu.read()
        runs[name] = await drive(getattr(scen, name), prepared, 16)
        out[name] = runs[name].summary()
        out[name]["cpu_ms_per_request"] = cpu.per_request(
            before, await cpu.read(), len(runs[name].latencies_ms)
        )
        print(f"  {name:12s} c=16  hop floor {out[name]}", file=sys.stderr)
    out["hop_same_as_raw"] = same_share(ids(runs["raw"]), ids(runs["hop"]))
    return out


def took_p50(run: Run) -> float | None:
    tooks = sorted(t for _, t in (o for o in run.outputs if o) if t is not None)
    return tooks[len(tooks) // 2] if tooks else None


async def measure(
    scen: Scenarios,
    prepared: list[Prepared],
    concurrencies: tuple[int, ...],
    warmup: int,
    cpu: CpuMeter,
    names: tuple[str, ...] = SCENARIOS,
) -> tuple[dict[str, Any], dict[str, Run]]:
    """Every scenario at every concurrency, interleaved per concurrency level, with the CPU
    each part spent per request at the highest concurrency (where every core is busy)."""
    results: dict[str, Any] = {k: {} for k in names}
    keep: dict[str, Run] = {}
    for name in names:  # warm caches and connections
        await drive(getattr(scen, name), prepared[:warmup], 4)
    for conc in concurrencies:
        for name in names:
            accounted = conc == max(concurrencies)
            before = await cpu.read() if accounted else None
            run = await drive(getattr(scen, name), prepared, conc)
            summary = run.summary()
            summary["es_took_p50_ms"] = took_p50(run)
            if before is not None:
                after = await cpu.read()
                summary["cpu_ms_per_request"] = cpu.per_request(
                    before, after, len(run.latencies_ms)
                )
            results[name][str(conc)] = summary
            keep[f"{name}@{conc}"] = run
            print(f"  {name:12s} c={conc:<3d} {summary}", file=sys.stderr)
    return results, keep


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
            print(f"corpus {chunks:,} chunks", file=sys.stderr)
            folder = corpus.write_corpus(CACHE, chunks)
            indexing = await index_corpus(es, alias, folder)
            print(f"  indexing {indexing}", file=sys.stderr)
            mapping = await es.indices.get_mapping(index=own(alias))
            acl = AccessControl(DEFAULT_MODEL, _write_policy(workdir))
            qs = list(corpus.queries(args.queries))
            prepared = prepare(qs, acl, FieldCatalog.from_mappings(dict(mapping)), corpus.TENANT)
            with Processes(es_url, alias, workdir, hop=args.hop) as procs:
                async with client_session(connections=64) as http:
                    scen = scenarios(http, es_url, procs, own(alias))
                    primary = chunks == args.chunks
                    concs = (1, 16)
                    cpu = CpuMeter(es, procs.service_pid)
                    measured, runs = await measure(scen, prepared, concs, args.warmup, cpu)
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
            print(f"indexer peak RSS on {args.rss_mb} MB", file=sys.stderr)
            result["rss"] = peak_rss(es_url, alias, args.rss_mb)
    finally:
        await drop_alias(es, alias)
        await drop_alias(es, f"{alias}-rss")
        await es.close()
    return result


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
        print("three nodes: starting scripts/es-cluster.sh", file=sys.stderr)
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


def _write_policy(workdir: Path) -> Path:
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
        help="also measure bench/hop.py, an HTTP hop that only forwards the raw query: the "
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


if __name__ == "__main__":
    options = parse()
    outcome = asyncio.run(rss_only(options) if options.rss_only else main(options))
    out = options.out or ROOT / "bench" / "results" / time.strftime("%Y%m%d-%H%M%S")
    report.write(outcome, out)
    print((out / "table.md").read_text("utf-8"))
    print(f"results in {out}", file=sys.stderr)
