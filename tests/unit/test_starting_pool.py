"""A parser pool started in the background (``indexer.workers.StartingPool``): a start that
failed is tried again when indexing asks again, and leaving never leaves a worker running."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from indexer.workers import StartingPool

pytestmark = pytest.mark.anyio


class FakePool:
    """A pool whose start the test controls: it fails, or waits for ``go``."""

    def __init__(self, fail: bool, go: asyncio.Event | None = None) -> None:
        self.fail, self.go = fail, go
        self.started = self.stopped = False

    async def __aenter__(self) -> FakePool:
        if self.go is not None:
            await self.go.wait()
        self.started = True
        if self.fail:
            raise RuntimeError("a parser worker did not start")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stopped = True


async def test_a_start_that_failed_is_stopped_and_tried_again_when_asked_again() -> None:
    made: list[FakePool] = []

    def make() -> Any:
        made.append(FakePool(fail=not made))  # (the first start fails, the second does not)
        return made[-1]

    async with StartingPool(make) as starting:
        with pytest.raises(RuntimeError):
            await starting.ready()
        pool = await starting.ready()
        assert pool is made[1]
        assert made[0].stopped  # (what did start of the failed one: stopped)
        assert not made[1].stopped
    assert made[1].stopped


async def test_leaving_while_the_start_runs_waits_for_it_then_stops_it() -> None:
    go = asyncio.Event()
    pool = FakePool(fail=False, go=go)
    async with StartingPool(lambda: pool) as starting:  # type: ignore[arg-type,return-value]
        assert starting is not None
        asyncio.get_running_loop().call_later(0.05, go.set)
    assert pool.started and pool.stopped  # (not cancelled mid-start: stopped once started)
