"""The source's lease (``indexer.lease``) against the real Elasticsearch: who may hold which
slot, a late renewal, renewals racing in one process, a run's want, a dead predecessor."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from elasticsearch import AsyncElasticsearch

from indexer.holder import Process
from indexer.lease import Lease, LeaseLost
from indexer.shards import Shard

pytestmark = pytest.mark.anyio


def lease(
    es: AsyncElasticsearch, alias: str, shard: Shard | None = None, ttl_s: float = 3.0, **more: str
) -> Lease:
    return Lease(es, f"{alias}-runs.lease-test", "kb", "/srv/share", shard, ttl_s=ttl_s, **more)


async def test_overlapping_slots_exclude_each_other_and_one_layout_s_shards_do_not(
    es: AsyncElasticsearch, alias: str
) -> None:
    whole = lease(es, alias + "-slots", name="a")
    assert await whole.acquire(wait_s=30)
    assert not await lease(es, alias + "-slots", Shard(0, 2), name="b").acquire(wait_s=0)
    await whole.release()
    zero, one = lease(es, alias + "-slots", Shard(0, 2)), lease(es, alias + "-slots", Shard(1, 2))
    assert await zero.acquire(wait_s=30) and await one.acquire(wait_s=30)
    for other in (lease(es, alias + "-slots", name="c"), lease(es, alias + "-slots", Shard(0, 3))):
        assert not await other.acquire(wait_s=0)
    await asyncio.gather(zero.renew(), one.renew(), zero.renew(), one.check())  # (all theirs)


async def test_a_late_renewal_keeps_the_lease_and_a_taken_one_is_lost(
    es: AsyncElasticsearch, alias: str
) -> None:
    first = lease(es, alias + "-late", name="first")
    assert await first.acquire(wait_s=30)
    await asyncio.sleep(4)  # (past its time, nobody took it)
    await asyncio.gather(first.renew(), first.check(), first.renew())
    await asyncio.sleep(4)
    second = lease(es, alias + "-late", name="second")
    assert await second.acquire(wait_s=30)  # (lapsed: taken)
    with pytest.raises(LeaseLost):
        await first.check()


async def test_a_waiting_run_makes_the_watcher_step_aside_and_goes_first(
    es: AsyncElasticsearch, alias: str
) -> None:
    # (a long lease: a run's want lasts one TTL, and on a loaded machine 3 s can pass between
    # the run's asking and the watcher's renewal — the test is about order, not expiry)
    watcher = lease(es, alias + "-want", ttl_s=60.0)
    assert await watcher.acquire(wait_s=30)
    run = lease(es, alias + "-want", ttl_s=60.0, role="index")
    assert not await run.acquire(wait_s=2)  # (its want is written)
    await watcher.renew()
    assert watcher.wanted
    await watcher.release()
    standby = lease(es, alias + "-want", ttl_s=60.0)
    assert not await standby.acquire(wait_s=0)  # (the run waiting goes first)
    assert await run.acquire(wait_s=30)


async def test_a_dead_predecessor_s_lease_is_taken_over_at_once(
    es: AsyncElasticsearch, alias: str
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    here = Process.here()
    gone = {"host": here.host, "boot": here.boot, "pid": int(dead.stdout), "started": 1,
            "pid_namespace": here.namespace}  # fmt: skip
    assert here.gone(gone)
    assert not here.gone({**gone, "pid_namespace": "pid:[1]"})  # (another namespace's)
    assert not here.gone(here.as_json())  # (this very process is alive)
    assert not here.gone({**here.as_json(), "host": "elsewhere"})  # (nothing known)
    holder = lease(es, alias + "-dead", ttl_s=60.0, name="w")
    assert await holder.acquire(wait_s=30)
    holder.process = Process(here.host, here.boot, int(dead.stdout), 1, here.namespace)  # (gone)
    await holder.renew()
    successor = lease(es, alias + "-dead", ttl_s=60.0, name="w")
    assert await successor.acquire(wait_s=20)  # (not waiting out the 60 s)
    alive_other = lease(es, alias + "-dead", ttl_s=60.0, name="w")
    assert not await alive_other.acquire(wait_s=2)  # (the successor is alive: waited for)
