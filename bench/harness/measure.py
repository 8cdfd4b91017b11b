"""Driving a scenario at a given concurrency and summarising latencies (pure helpers)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Run:
    """Latencies (ms), wall time and whatever the calls returned."""

    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    outputs: list[Any] = field(default_factory=list)
    errors: int = 0
    failures: list[str] = field(default_factory=list)  # the first few errors, as text

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        if not lat:
            return {"n": 0, "errors": self.errors, "failures": self.failures}

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, round(p / 100 * (len(lat) - 1)))], 2)

        return {
            "n": len(lat),
            "errors": self.errors,
            "p50_ms": pct(50),
            "p95_ms": pct(95),
            "p99_ms": pct(99),
            "mean_ms": round(statistics.fmean(lat), 2),
            "qps": round(len(lat) / self.wall_s, 1) if self.wall_s else 0.0,
            **({"failures": self.failures} if self.failures else {}),
        }


def rotated(names: Sequence[str], by: int) -> list[str]:
    """``names`` starting at position ``by`` (modulo their number), the rest after."""
    shift = by % len(names)
    return [*names[shift:], *names[:shift]]


async def timed(run: Run, call: Callable[[T], Awaitable[Any]], items: Sequence[T], i: int) -> float:
    """``call`` on item ``i``, its output and latency recorded in ``run`` (a failure counted,
    the first few kept as text); the seconds it took, 0 for a failure (not a latency)."""
    started = time.perf_counter()
    try:
        run.outputs[i] = await call(items[i])
    except Exception as exc:
        run.errors += 1
        if len(run.failures) < 3:
            run.failures.append(f"{type(exc).__name__}: {exc}"[:300])
        return 0.0
    elapsed = time.perf_counter() - started
    run.latencies_ms.append(elapsed * 1000)
    return elapsed


async def interleaved(
    calls: dict[str, Callable[[T], Awaitable[Any]]], items: Sequence[T]
) -> dict[str, Run]:
    """Every call on each item in turn, one request at a time (concurrency 1), the order
    rotated per item: a drift of the machine or of Elasticsearch's caches during the run
    falls on every scenario alike, instead of on whichever ran while it lasted. A
    scenario's wall time is its own calls' (so its QPS is one over its mean latency)."""
    runs = {name: Run(outputs=[None] * len(items)) for name in calls}
    for i in range(len(items)):
        for name in rotated(list(calls), i):
            runs[name].wall_s += await timed(runs[name], calls[name], items, i)
    return runs


def add(total: Run, part: Run, offset: int) -> None:
    """``part``, a run over the items from ``offset`` on, into ``total`` (a run over all)."""
    total.latencies_ms.extend(part.latencies_ms)
    total.wall_s += part.wall_s
    total.errors += part.errors
    total.failures.extend(part.failures[: max(0, 3 - len(total.failures))])
    total.outputs[offset : offset + len(part.outputs)] = part.outputs


async def drive(call: Callable[[T], Awaitable[Any]], items: Sequence[T], concurrency: int) -> Run:
    """Run ``call`` over ``items`` with ``concurrency`` workers; outputs keep item order."""
    run = Run(outputs=[None] * len(items))
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(items):
            i = next_index
            next_index += 1
            await timed(run, call, items, i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    run.wall_s = time.perf_counter() - started
    return run
