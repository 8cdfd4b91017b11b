"""A parser pool started in the background, so that what needs no parser never waits for it.

A worker process starts by importing every parser, the chunker and the word segmenter
(seconds on a quiet machine, far more on a busy one). A watcher that starts again must narrow
what changed while it was down — deletions and holds, which read nothing — at once; only the
documents it then indexes need a worker. ``StartingPool`` starts the pool as soon as the
watcher holds its lease and hands it over when indexing first asks for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from indexer.workers.pool import ParserPool


class StartingPool:
    """``make()``'s pool, started beside the caller's work: ``await ready()`` for it. Use as
    ``async with StartingPool(make) as starting``; leaving waits for a start under way (its
    workers are then stopped, never left running) and stops the pool."""

    def __init__(self, make: Callable[[], ParserPool]) -> None:
        self._make = make
        self._pool: ParserPool | None = None
        self._start: asyncio.Task[ParserPool] | None = None

    def _begin(self) -> None:
        self._pool = self._make()
        self._start = asyncio.create_task(self._pool.__aenter__())

    async def __aenter__(self) -> StartingPool:
        self._begin()
        return self

    async def ready(self) -> ParserPool:
        """The pool, once its workers have started. A start that failed (a worker that did
        not load) is stopped and tried again here, so a settle that asks again may succeed."""
        assert self._start is not None
        if self._start.done() and not self._start.cancelled() and self._start.exception():
            await self._stop()
            self._begin()
        assert self._start is not None
        return await asyncio.shield(self._start)

    async def _stop(self) -> None:
        start, pool = self._start, self._pool
        if start is None or pool is None:
            return
        await asyncio.wait({start})  # (never cancelled: a worker being started would be left)
        if not start.cancelled():
            start.exception()  # (retrieved: a failed start was said where it was awaited)
        await pool.__aexit__(None, None, None)  # (the workers that did start, stopped)
        self._start = self._pool = None

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()
