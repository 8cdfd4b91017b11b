"""CPU per request of each part, and Elasticsearch pinned to a core of its own.

The parts are Elasticsearch, the service and the load generator.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.harness.measure import drive
from bench.harness.service import cpu_seconds
from bench.query.processes import Processes
from bench.query.scenarios import Prepared, Scenarios
from retrieval_svc.words import say


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
            raise SystemExit(say("bench_two_cpus"))
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
        raise SystemExit(say("bench_one_local_node"))
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
            said = say("bench_separate_cores", name=f"{name:12s}", result=out[name])
            print(said, file=sys.stderr)
    return out
