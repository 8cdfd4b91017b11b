"""The watcher's passes: a settle's indexing (or a re-listing, or what a rules edit held read
again) runs as a task beside the loop, fenced from what the loop narrows meanwhile; when one is
over its report is accounted and what was narrowed or heard meanwhile is queued, and a failed
one is kept and tried again after a back-off. ``Watcher`` is one (``indexer.watch.watcher``
is its loop, ``indexer.watch.keeping`` what it keeps beside)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from indexer.lease import LeaseLost
from indexer.watch import last_listing
from indexer.watch.events import Heard
from indexer.watch.health import account
from indexer.watch.keeping import Keeping, sleep_until
from indexer.watch.settle import Plan, Settled, finish, narrow
from indexer.workers import StartingPool
from indexer.writing import Fence
from retrieval_svc.embedding import Embedder
from retrieval_svc.words import say

log = logging.getLogger("indexer.watch.watcher")  # (the watcher's lines, one logger)


@dataclass(slots=True)
class _Pass:
    """A settle's indexing, running beside the watcher's loop."""

    task: asyncio.Task[Settled]
    fence: Fence
    taken: Heard  # what it settles
    relist: bool
    everything: bool
    planned: dict[str, tuple[str, str]]  # what it will write: document → (ETag, version)


class Passes(Keeping):
    """Runs and ends the watcher's passes (see the module)."""

    embedder: Embedder | None
    pool: StartingPool | None
    narrowed: Heard
    said: Callable[[str, Settled], None]
    state_id: str
    _stop: asyncio.Event
    _relisting_pass: _Pass | None
    _events_pass: _Pass | None
    _rules_keys: list[str]
    _next_relisting: float
    _backoff: float

    def _running(self) -> list[_Pass]:
        """The passes running, the re-listing's first (the order their locks are taken)."""
        return [p for p in (self._relisting_pass, self._events_pass) if p is not None]

    def _narrowed_only(self, taken: Heard, done: Settled, *, relist: bool = False) -> None:
        """``taken`` narrowed while a pass runs: settled once none does (by a re-listing)."""
        self.narrowed.add(taken)
        self.everything = self.everything or relist
        self._account(taken, done, False, indexed=False)
        self.said("events", done)

    def _start(
        self,
        work: Callable[[Fence, dict[str, tuple[str, str]]], Coroutine[Any, Any, Settled]],
        taken: Heard,
        relist: bool,
        everything: bool,
        planned: dict[str, tuple[str, str]] | None = None,
        beside: bool = False,  # (in the re-listing's place, events settled beside it)
    ) -> None:
        """Run ``work`` as the pass, with the fence of what is narrowed from now on (the pass
        must not write it) and what it plans to write (``work`` fills it when it lists)."""
        fence, planned = Fence(), dict(planned or {})
        task = asyncio.create_task(work(fence, planned))
        task.add_done_callback(lambda _task: self._wake.set())
        if relist or beside:
            self._relisting_pass = _Pass(task, fence, taken, relist, everything, planned)
        else:
            self._events_pass = _Pass(task, fence, taken, relist, everything, planned)
        self.status.state = "re-listing" if relist else "indexing"

    def _read_again(self, keys: list[str]) -> None:
        """What a rules edit held, read and written again with its new roles in a pass of its
        own, as a re-listing's (what is heard meanwhile is settled beside it, fenced)."""

        async def work(fence: Fence, planned: dict[str, tuple[str, str]]) -> Settled:
            plan = await narrow(self.es, self.source, self.options, keys, spare=fence.keys)
            planned.update(plan.planned)
            return await self._finish(plan, fence)

        self._start(work, Heard(set(keys), at=time.time()), False, False, beside=True)

    async def _finish(self, plan: Plan, fence: Fence, _planned: object = None) -> Settled:
        pool = await self.pool.ready() if self.pool is not None and plan.write else None
        return await finish(self.es, plan, embedder=self.embedder, pool=pool, fence=fence)

    async def _relisting(self, fence: Fence, planned: dict[str, tuple[str, str]]) -> Settled:
        """A re-listing as a pass: the whole source listed and compared (what is gone deleted,
        what changed held), then indexed. What is heard meanwhile the loop narrows and settles
        in a pass of its own beside this one: fenced from this one, and spared by its listing
        (which may be older than what that pass wrote)."""
        rules = self.options.acl_rules
        walked = await last_listing.walk_source(self.source)
        plan = await narrow(self.es, self.source, self.options, None, spare=fence.keys)
        planned.update(plan.planned)  # (from now on, an event leaves these to the pass)
        self.status.state = "indexing"
        done = await self._finish(plan, fence)
        if walked is not None and not done.failures:  # (kept: what this settled, no newer)
            await last_listing.keep(self.es, self.runs, self.state_id, walked, rules)
        return done

    async def _passed(self, done_pass: _Pass) -> None:
        """A pass is over: its report accounted, what was narrowed or heard meanwhile queued
        to be settled whole."""
        if done_pass is self._relisting_pass:
            self._relisting_pass = None
        else:
            self._events_pass = None
        again = set(self._rules_keys)  # (read again anyway: not many keys to re-list for)
        for key in (k for k in done_pass.fence.keys.values() if k not in again):
            self.narrowed.keys.add(key)
            self.narrowed.at = self.narrowed.at or time.time()
        try:
            done = done_pass.task.result()
        except LeaseLost:
            raise
        except Exception as exc:
            await self._failed(None, exc, done_pass.taken, done_pass.everything or done_pass.relist)
            return
        self._backoff = 1.0
        for ack in done_pass.taken.ack:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(ack)
        self._account(done_pass.taken, done, done_pass.relist)
        if done_pass.relist:
            self._next_relisting = time.monotonic() + self.watch.rescan_s
            self.health.ready = True
            if self.root is not None and not self.root.problem and done_pass.everything:
                self.health.problems.pop("source", None)  # (re-listed whole since)
        self.status.state = "watching"
        self.said("re-listing" if done_pass.relist else "events", done)

    async def _failed(
        self, stop: asyncio.Event | None, exc: Exception, taken: Heard, everything: bool
    ) -> None:
        """A settle failed (Elasticsearch or the source away): what it took is kept and
        tried again after a back-off."""
        self.pending.add(taken)
        self.everything = self.everything or everything
        self.status.errors += 1
        self.status.last_error = f"{type(exc).__name__}: {exc}"[:500]
        self.status.state = "waiting for Elasticsearch or the source"
        self.metrics.errors.labels(**self.metrics.labels).inc()
        log.error(say("settle_failed", why=exc, seconds=f"{self._backoff:.0f}"))
        await sleep_until(self._stop if stop is None else stop, self._backoff)
        self._backoff = min(self.watch.backoff_max_s, self._backoff * 2)

    def _account(self, taken: Heard, done: Settled, relist: bool, *, indexed: bool = True) -> None:
        at = taken.at if taken.keys else 0.0
        account(self.status, self.metrics, at, done, relist, len(self.pending.keys), indexed)
