"""One measured round of scenarios: latencies, same answers, CPU; and the forward-only floor."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import aiohttp
from elasticsearch import AsyncElasticsearch

from bench.common import KEY, SCENARIOS
from bench.cpu import CpuMeter
from bench.measure import Run, add, drive, interleaved, rotated
from bench.processes import Processes
from bench.scenarios import Prepared, Scenarios


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


#: Above concurrency 1 the queries are cut into this many blocks, and every scenario runs each
#: block before the next one starts (the order rotated): a slow minute of the shared machine
#: then falls on every scenario instead of on one (one run of 1,000 queries each, in turn, once
#: had Elasticsearch spend 1.19 × raw's CPU per request on the same queries for the service).
BLOCKS = 4


def _summary(run: Run) -> dict[str, Any]:
    summary = run.summary()
    summary["es_took_p50_ms"] = took_p50(run)
    return summary


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
        if conc == 1:  # one request at a time: the scenarios take turns on every query
            runs = await interleaved({name: getattr(scen, name) for name in names}, prepared)
            for name in names:
                results[name]["1"] = _summary(runs[name])
                keep[f"{name}@1"] = runs[name]
                print(f"  {name:12s} c=1   {results[name]['1']}", file=sys.stderr)
            continue
        accounted = conc == max(concurrencies)
        totals = {name: Run(outputs=[None] * len(prepared)) for name in names}
        # CPU seconds of each part (Elasticsearch, service, load generator), per scenario
        spent: dict[str, tuple[float, ...]] = dict.fromkeys(names, (0.0, 0.0, 0.0))
        size = -(-len(prepared) // blocks)
        reading = await cpu.read() if accounted else None
        for block in range(blocks):  # each scenario runs on every block, in a rotated order
            offset = block * size
            for name in rotated(names, block):
                part = await drive(getattr(scen, name), prepared[offset : offset + size], conc)
                add(totals[name], part, offset)
                if reading is not None:  # (one reading ends a block and begins the next)
                    before, reading = reading, await cpu.read()
                    spent[name] = tuple(
                        s + b - a for s, a, b in zip(spent[name], before, reading, strict=True)
                    )
        for name in names:
            run = totals[name]
            summary = _summary(run)
            if accounted:
                summary["cpu_ms_per_request"] = cpu.per_request(
                    (0.0, 0.0, 0.0), spent[name], len(run.latencies_ms)
                )
            results[name][str(conc)] = summary
            keep[f"{name}@{conc}"] = run
            print(f"  {name:12s} c={conc:<3d} {summary}", file=sys.stderr)
    return results, keep
