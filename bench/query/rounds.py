"""One measured round of scenarios: latencies, same answers, CPU; and the forward-only floor."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import aiohttp
from elasticsearch import AsyncElasticsearch

from bench.harness.measure import Run, add, drive, interleaved, rotated
from bench.query.common import KEY, SCENARIOS
from bench.query.cpu import CpuMeter
from bench.query.processes import Processes
from bench.query.scenarios import Prepared, Scenarios
from retrieval_svc.words import say


def ids(run: Run) -> list[list[str]]:
    """The chunk ids each call returned (empty where it failed)."""
    return [list(o[0]) if o else [] for o in run.outputs]


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


async def hop_floor(
    es: AsyncElasticsearch, scen: Scenarios, prepared: list[Prepared], procs: Processes
) -> dict[str, Any]:
    """Raw, bench/query/hop.py and the service at concurrency 16 on the shared cores, each with the
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
        print(say("bench_hop_floor", name=f"{name:12s}", result=out[name]), file=sys.stderr)
    out["hop_same_as_raw"] = same_share(ids(runs["raw"]), ids(runs["hop"]))
    return out


def took_p50(run: Run) -> float | None:
    tooks = sorted(t for _, t in (o for o in run.outputs if o) if t is not None)
    return tooks[len(tooks) // 2] if tooks else None


#: Above concurrency 1 the queries are cut into this many blocks, and every scenario runs each
#: block before the next one starts (the order rotated): a slow minute of the shared machine
#: then falls on every scenario instead of on one (one run of 1,000 queries each, in turn, once
#: had Elasticsearch spend 1.19 × raw's CPU per request on the same queries for the service).
BLOCKS = 4


#: CPU seconds of Elasticsearch, the service and the load generator, before any is spent
NOTHING_SPENT: tuple[float, ...] = (0.0, 0.0, 0.0)


async def in_blocks(
    calls: dict[str, Any],
    prepared: Sequence[Any],
    conc: int,
    blocks: int,
    cpu: CpuMeter | None,
) -> tuple[dict[str, Run], dict[str, tuple[float, ...]]]:
    """Every call at concurrency ``conc`` on each of ``blocks`` slices of the queries before
    the next slice starts, the order rotated per slice; with ``cpu``, the CPU seconds each
    part spent on each call's slices (one reading ends a slice and begins the next)."""
    runs = {name: Run(outputs=[None] * len(prepared)) for name in calls}
    spent = dict.fromkeys(calls, NOTHING_SPENT) if cpu is not None else {}
    size = -(-len(prepared) // blocks)
    reading = await cpu.read() if cpu is not None else NOTHING_SPENT
    for block in range(blocks):
        offset = block * size
        for name in rotated(list(calls), block):
            part = await drive(calls[name], prepared[offset : offset + size], conc)
            add(runs[name], part, offset)
            if cpu is not None:
                before, reading = reading, await cpu.read()
                spent[name] = tuple(
                    s + b - a for s, a, b in zip(spent[name], before, reading, strict=True)
                )
    return runs, spent


async def measure(
    scen: object,
    prepared: Sequence[Any],
    concurrencies: tuple[int, ...],
    warmup: int,
    cpu: CpuMeter,
    names: tuple[str, ...] = SCENARIOS,
    blocks: int = BLOCKS,
) -> tuple[dict[str, Any], dict[str, Run]]:
    """Every scenario (a method of ``scen`` per name) at every concurrency: at concurrency 1
    the scenarios take turns query by query (``interleaved``), above it block by block
    (``blocks``), with the CPU each part spent per request at the highest concurrency (where
    every core is busy)."""
    results: dict[str, Any] = {k: {} for k in names}
    keep: dict[str, Run] = {}
    for name in names:  # warm caches and connections
        await drive(getattr(scen, name), prepared[:warmup], 4)
    for conc in concurrencies:
        calls = {name: getattr(scen, name) for name in names}
        accounted = conc == max(concurrencies)
        spent: dict[str, tuple[float, ...]] = {}
        if conc == 1:  # one request at a time: the scenarios take turns on every query
            runs = await interleaved(calls, prepared)
        else:
            runs, spent = await in_blocks(calls, prepared, conc, blocks, cpu if accounted else None)
        for name in names:
            run = runs[name]
            summary = run.summary()
            summary["es_took_p50_ms"] = took_p50(run)
            if name in spent:
                summary["cpu_ms_per_request"] = cpu.per_request(
                    NOTHING_SPENT, spent[name], len(run.latencies_ms)
                )
            results[name][str(conc)] = summary
            keep[f"{name}@{conc}"] = run
            print(f"  {name:12s} c={conc:<3d} {summary}", file=sys.stderr)
    return results, keep
