"""The watcher's loop: what it hears becomes pending keys, settled a batch at a time; a full
re-listing every ``rescan_s`` (and at start, and after its rules or manifest changed) settles
everything; Elasticsearch or the source going away is waited out with what was heard kept.

It holds its source's lease (``indexer.lease``) while it works — every write checks it first —
so no other writer of the source and shard (a second watcher, an ``index`` run) writes at
once; when the lease is lost, or an ``index`` run asks for it, it stops writing and waits for
it again, with what it heard kept. It looks at its folder's own identity every second (a
share replaced or unmounted is watched again and re-listed), and keeps a status record (lag,
last event, last re-listing, problems) that ``show`` and the console read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from elasticsearch import AsyncElasticsearch

from indexer.lease import Lease, LeaseLost, SteppedAside, lease_id
from indexer.loading import IndexOptions
from indexer.sources import Source
from indexer.watch import last_listing
from indexer.watch.events import FileStamps, Heard
from indexer.watch.from_index import hold_keys, narrow_rules
from indexer.watch.health import Health, Status, WatchMetrics
from indexer.watch.keeping import Events, WatchOptions
from indexer.watch.passes import Passes, _Pass
from indexer.watch.root import RootWatch
from indexer.watch.settle import Settled, narrow
from indexer.workers import ParserPool, StartingPool
from retrieval_svc.embedding import Embedder
from retrieval_svc.search.runs import runs_index
from retrieval_svc.words import say

log = logging.getLogger(__name__)

__all__ = ["MANY_KEYS", "Events", "WatchOptions", "Watcher"]

MANY_KEYS = 200  # keys heard at once past which one listing is cheaper than a look at each
READ_AGAIN = 1000  # documents a rules edit held, read again a pass at a time


class Watcher(Passes):
    """Keeps ``options.knowledge_id`` true to ``source`` until ``stop`` is set."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        source: Source,
        options: IndexOptions,
        *,
        index_alias: str,
        watch: WatchOptions,
        events: Events | None = None,
        files: FileStamps | None = None,
        reload: Callable[[], IndexOptions] | None = None,
        embedder: Embedder | None = None,
        health: Health | None = None,
        said: Callable[[str, Settled], None] | None = None,
        root: RootWatch | None = None,
    ) -> None:
        self.es, self.source, self.options, self.watch = es, source, options, watch
        self.events, self.files, self.reload, self.embedder = events, files, reload, embedder
        self.root = root
        shard = f"@shard-{options.shard.index}-of-{options.shard.count}" if options.shard else ""
        self.source_name = options.source_name or source.description
        digest = lease_id(options.knowledge_id, self.source_name).rsplit("-", 1)[-1]
        self.status_id = f"{options.knowledge_id}@watch-{digest}{shard}"  # (one per source)
        self.legacy_status_id = f"{options.knowledge_id}@watch{shard}"
        self.state_id = last_listing.state_id(self.status_id)
        self.runs = runs_index(index_alias, options.tenant)
        labels = {"knowledge_id": options.knowledge_id, "shard": str(options.shard or "")}
        self.health = health or Health(WatchMetrics(labels))
        self.metrics = self.health.metrics
        self.said = said or (lambda _what, _settled: None)
        self.status = Status()
        self.lease: Lease | None = None
        self.pool: StartingPool | None = None  # (started beside the narrowing, when workers)
        self.pending = Heard()  # heard, not yet looked at
        self.narrowed = Heard()  # narrowed while a pass ran: settled once the events pass is over
        self.everything = True  # (the first settle is a full re-listing)
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._listening = asyncio.Event()  # set: the event stream ends and starts again
        # The passes running: a re-listing's, and one for what was heard (which may start
        # while a re-listing runs, so a new document never waits for a long listing).
        self._relisting_pass: _Pass | None = None
        self._events_pass: _Pass | None = None
        self._rules_before: IndexOptions | None = None  # the options before a rules edit
        # What changed since the last listing kept (a start): looked at before the first
        # whole re-listing, a batch at a time.
        self._first_keys: list[str] = []
        self._rules_keys: list[str] = []  # what a rules edit held: read again before re-listing
        self._kept_looked = False
        self._next_relisting = 0.0
        self._backoff = 1.0

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the knowledge base true to the source until ``stop``: hear changes all along;
        settle them while holding the source's lease; when the lease is lost (another writer
        took it) or asked for (an ``index`` run), stop writing and wait for it again."""
        self._stop = stop
        with contextlib.suppress(Exception):  # (the record kept per knowledge base before)
            await self.es.options(ignore_status=404).delete(
                index=self.runs, id=self.legacy_status_id
            )
        async with asyncio.TaskGroup() as group:
            listening = group.create_task(self._listen(stop))
            try:
                while not stop.is_set():
                    try:
                        await self._hold(stop)
                    except LeaseLost as lost:
                        aside = isinstance(lost, SteppedAside)
                        self.status.state = "stepped aside" if aside else "lost its lease"
                        self.health.ready = False
                        log.warning(say("watch_aside" if aside else "watch_lost", why=str(lost)))
            finally:
                stop.set()
                listening.cancel()

    async def _hold(self, stop: asyncio.Event) -> None:
        """Take the lease (waiting while another writer holds it) and work while it is ours;
        LeaseLost when it is no longer."""
        lease = self.lease = Lease(
            self.es, self.runs, self.options.knowledge_id, self.source_name, self.options.shard,
            name=self.watch.lease_name, ttl_s=self.watch.lease_ttl_s,
        )  # fmt: skip
        self.status.state = "waiting for the lease"
        if not await lease.acquire(stop):
            return
        # (every write checks it, and carries its version)
        self.options = replace(self.options, guard=lease.check, stamp=lease.version)
        try:
            async with contextlib.AsyncExitStack() as stack:
                options = self.options
                if options.workers and self.pool is None:  # (a settle never waits for one)
                    # (started in the background: narrowing reads nothing, and never waits
                    # for the workers' imports — only indexing does)
                    self.pool = await stack.enter_async_context(
                        StartingPool(
                            lambda: ParserPool(
                                options.workers, options.budget, ocr=options.ocr != "off"
                            )
                        )
                    )
                async with asyncio.TaskGroup() as group:
                    keeping = group.create_task(self._keep(lease, stop))
                    await self._work(stop)
                    keeping.cancel()
        except* LeaseLost as lost:
            raise lost.exceptions[0] from None
        finally:
            self.pool = None
            if self.status.state not in ("lost its lease", "stepped aside"):
                self.status.state = "stopped"
            with contextlib.suppress(Exception):
                await self._record()
            with contextlib.suppress(Exception):
                await lease.release()

    async def _work(self, stop: asyncio.Event) -> None:
        """Settle what was heard (everything when due), narrowing first. The indexing of a
        settle runs as a *pass* beside this loop: what is heard meanwhile is narrowed at once
        (a fence keeps the pass from writing back what it read before) and settled once the
        events pass is over — beside a re-listing still running, which is fenced from it."""
        self._next_relisting = 0.0
        self._backoff = 1.0
        if not self._kept_looked:
            self._kept_looked = True
            await self._since_kept()
        try:
            await self._loop(stop)
        finally:
            for running in self._running():  # (stopped mid-pass: settled again after)
                running.task.cancel()
                with contextlib.suppress(BaseException):
                    await running.task
                self.pending.add(running.taken)
                self.pending.keys.update(running.fence.keys.values())
                self.everything = self.everything or running.relist
            self._relisting_pass = self._events_pass = None
            self.pending.add(self.narrowed)
            self.narrowed = Heard()

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.health.beat()
            if ended := [p for p in self._running() if p.task.done()]:
                await self._passed(ended[0])
                continue
            # (from the index, without listing the source; a start's own differences first:
            # a few keys narrow in a second, a rules edit's hold may take many)
            if self._rules_before is not None and not self._first_keys:
                await self._narrow_rules()
                continue
            if (
                self._events_pass is None
                and (self.narrowed.keys or self.narrowed.ack)
                and (self._relisting_pass is None or len(self.narrowed.keys) <= MANY_KEYS)
            ):  # (settled beside a re-listing, which is fenced from them; many: re-listed)
                self.pending.add(self.narrowed)
                self.narrowed = Heard()
            # (before the re-listing: a start's differences; what a rules edit held, read again
            # in the re-listing's place, events settled beside it)
            if first := bool(self._first_keys or self._rules_keys):
                if batch := self._first_keys[:MANY_KEYS]:
                    self.pending.add(Heard(set(batch), at=time.time()))
                    del self._first_keys[:MANY_KEYS]
                elif not self._running():
                    self._read_again(self._rules_keys[:READ_AGAIN])
                    del self._rules_keys[:READ_AGAIN]
                    continue
            due = self.everything or time.monotonic() >= self._next_relisting
            # (a re-listing waits for the passes running; many keys are cheaper listed than
            # looked at)
            relist = (
                not first and not self._running() and (due or len(self.pending.keys) > MANY_KEYS)
            )
            if not relist and not (self.pending.keys or self.pending.ack):
                self._wake.clear()
                if any(p.task.done() for p in self._running()):
                    continue
                wait = max(0.1, min(5.0, self._next_relisting - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_either(self._wake, stop), timeout=wait)
                continue
            taken, self.pending = self.pending, Heard()
            everything = relist and self.everything
            if relist:
                self.everything = False
            running = self._running()
            self.status.state = "re-listing" if relist else "settling"
            try:
                if self.lease is not None and not self.lease.fresh:  # (never on a lapsed one)
                    await self.lease.renew()
                if relist:  # (listed in the pass: the loop narrows what it hears meanwhile)
                    # (heard before it: narrowed now, not at its comparison — a minute at
                    # 100,000 objects; it lists after this and writes them)
                    if taken.keys and len(taken.keys) <= MANY_KEYS:
                        early = await narrow(self.es, self.source, self.options, taken.keys)
                        self.said("events", early.done)
                    self._start(self._relisting, taken, True, everything)
                    continue
                fences = [p.fence for p in running]
                if running and len(taken.keys) > MANY_KEYS:  # (held unlooked, re-listed after)
                    done = await hold_keys(self.es, self.source, self.options, taken.keys, fences)
                    self._narrowed_only(taken, done, relist=True)
                    continue
                planned = {k: v for p in running for k, v in p.planned.items()}
                plan = await narrow(self.es, self.source, self.options, taken.keys, fences, planned)
            except LeaseLost:
                raise
            except Exception as exc:  # (Elasticsearch or the source away: kept, tried again)
                await self._failed(stop, exc, taken, everything or relist)
                continue
            if self._events_pass is not None:  # (narrowed now; read and written after it)
                taken.keys.update(ref.key for ref in plan.write)
                self._narrowed_only(taken, plan.done)
                continue
            self._start(functools.partial(self._finish, plan), taken, False, False, plan.planned)

    async def _since_kept(self) -> None:
        """At the start: what changed since the last listing kept is looked at first (a
        rules file changed since: held from the index first), then the whole re-listing."""
        args = (self.es, self.runs, self.state_id, self.source, self.options.acl_rules)
        if (since := await last_listing.at_start(*args)) is None:
            return
        self._first_keys = sorted(since.keys)
        if since.rules_changed:  # (the kept rules are the oldest the index may still hold:
            # an edit heard since this watcher read the file does not replace them)
            self._rules_before = replace(self.options, acl_rules=since.rules_before)

    async def _narrow_rules(self) -> None:
        """A rules edit held in force from the index at once (a pass running or not); what it
        held is read again at once, before the re-listing it asked for. One not held (the
        lease lost, Elasticsearch away) is kept — the oldest rules the index may hold, over
        any edit heard meanwhile — and held once the watcher works again, as a failed pass
        is tried again: never dropped, so its ``rules`` report (the permission history's
        ``rules-changed`` event) still comes."""
        before, self._rules_before = self._rules_before, None
        assert before is not None
        try:
            fences = [p.fence for p in self._running()]
            done = await narrow_rules(self.es, self.source, before, self.options, fences)
        except BaseException as exc:
            self._rules_before = before
            if isinstance(exc, LeaseLost) or not isinstance(exc, Exception):
                raise  # (the lease lost, here or beside it, or stopped: held by the next holding)
            # (Elasticsearch away: kept, tried again after a back-off)
            log.warning(say("rules_edit_not_held", why=exc))
            await self._failed(None, exc, Heard(at=self.pending.at), True)  # (nothing more taken)
            return
        self._rules_keys.extend(done.keys)
        self.said("rules", done)


async def _either(wake: asyncio.Event, stop: asyncio.Event) -> None:
    waits = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
