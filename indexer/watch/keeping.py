"""The watcher's surroundings, kept beside its settling: what it hears (a folder's events, a
queue's, started again when they fail or the folder is replaced), its lease renewed (an
``index`` run waiting: it steps aside), its rules, manifest and folder looked at every second
through the checks the start applies, what is wrong said at once (Elasticsearch not
answering, the folder replaced or gone) and its status record written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace

from elasticsearch import AsyncElasticsearch

from indexer.lease import DEFAULT_TTL_S, Lease, LeaseLost, SteppedAside
from indexer.loading import IndexOptions
from indexer.sources import Source
from indexer.watch.events import FileStamps, Heard
from indexer.watch.health import Health, Status, WatchMetrics, rejected, status_record
from indexer.watch.root import RootWatch
from retrieval_svc.words import say

log = logging.getLogger("indexer.watch.watcher")

Events = Callable[[asyncio.Event], AsyncIterator[Heard]]


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How the watcher listens and how often it re-lists."""

    rescan_s: float = 60.0  # a full re-listing this often (events or not)
    lease_ttl_s: float = DEFAULT_TTL_S
    lease_name: str = ""  # who this watcher is to its lease (default: the host's name)
    status_s: float = 10.0  # the status record and the lease renewed this often
    backoff_max_s: float = 30.0  # the longest wait before a failed settle is tried again


class Keeping:
    """What the watcher does beside settling: it hears (events into ``pending``), keeps (its
    lease renewed, its rules, manifest and folder looked at, its status record written) and
    says what is wrong (Elasticsearch not answering, the folder replaced). ``Watcher`` is
    one."""

    es: AsyncElasticsearch
    source: Source
    options: IndexOptions
    watch: WatchOptions
    events: Events | None
    files: FileStamps | None
    reload: Callable[[], IndexOptions] | None
    root: RootWatch | None
    health: Health
    metrics: WatchMetrics
    status: Status
    lease: Lease | None
    pending: Heard
    everything: bool
    source_name: str
    runs: str
    status_id: str
    _wake: asyncio.Event
    _listening: asyncio.Event
    _rules_before: IndexOptions | None

    def _hear(self, heard: Heard, kind: str) -> None:
        if heard.rejected:
            rejected(self.status, self.metrics, heard.rejected)
        self.pending.add(heard)
        self.status.events += len(heard.keys)
        if heard.keys:
            self.status.last_event_at = time.time()
            self.metrics.last_event.labels(**self.metrics.labels).set(self.status.last_event_at)
            self.metrics.events.labels(kind=kind, **self.metrics.labels).inc(len(heard.keys))
        self.metrics.queue.labels(**self.metrics.labels).set(len(self.pending.keys))
        self._wake.set()

    async def _listen(self, stop: asyncio.Event) -> None:
        """Events into ``pending`` (while the lease is waited for too); an event stream that
        fails, or whose folder was replaced, is started again (the re-listing covers the
        gap)."""
        if self.events is None:
            return
        while not stop.is_set():
            self._listening = listening = asyncio.Event()
            relay = asyncio.create_task(_relay(stop, listening))
            try:
                async for heard in self.events(listening):
                    self._hear(heard, heard.kind or ("folder" if not heard.ack else "queue"))
            except Exception as exc:  # (a share unmounted, a queue unreachable: try again)
                log.warning(say("events_stopped", kind=type(exc).__name__, why=exc))
                self.status.last_error = f"events: {type(exc).__name__}: {exc}"
                await sleep_until(listening, 5.0)
            finally:
                relay.cancel()

    async def _keep(self, lease: Lease, stop: asyncio.Event) -> None:
        """Every second: the rules, the manifest and the folder itself looked at; every third
        of the lease's time: the lease renewed (an ``index`` run waiting for it: stepped
        aside); every ``status_s``: the status record written. Elasticsearch not answering
        is said and shown within a renewal's time."""
        next_renewal = next_status = 0.0
        while not stop.is_set():
            if self.files is not None and self.files.changed():
                self._files_changed()
            if self.root is not None and (now_is := self.root.changed()) is not None:
                self._root_changed(now_is)
            now = time.monotonic()
            try:
                if now >= next_renewal:
                    await lease.renew()  # (LeaseLost: another writer works now)
                    next_renewal = now + self.watch.lease_ttl_s / 3
                    self._answering(None)
                    if lease.wanted:
                        raise SteppedAside(say("watch_wanted", source=self.source_name))
                if now >= next_status:
                    await self._record()
                    next_status = now + self.watch.status_s
            except LeaseLost:
                raise
            except Exception as exc:  # (Elasticsearch away: no settle runs without it)
                self._answering(exc)
            await sleep_until(stop, 1.0)

    def _answering(self, exc: Exception | None) -> None:
        """Elasticsearch answered (None) or did not: said once, in the health record."""
        if exc is None:
            if self.health.problems.pop("elasticsearch", None):
                log.warning(say("es_answering"))
            return
        why = f"{type(exc).__name__}: {exc}"[:300]
        if "elasticsearch" not in self.health.problems:
            log.error(say("es_not_answering", why=why))
        self.health.problems["elasticsearch"] = why
        self.status.last_error = f"elasticsearch: {why}"

    def _root_changed(self, now_is: tuple[int, int] | str) -> None:
        """The folder replaced (another device or inode), gone or back: watched again, listed
        again whole, and named in the health record."""
        assert self.root is not None
        if isinstance(now_is, str):
            problem = say("root_gone", root=str(self.root.root), why=now_is)
        else:
            problem = say("root_replaced", root=str(self.root.root))
        log.error(problem)
        self.health.problems["source"] = problem
        self.status.last_error = problem
        self.status.root_changed_at = time.time()
        self._listening.set()  # (the file-system watch follows the folder now there)
        self.everything = True
        self._wake.set()

    def _files_changed(self) -> None:
        if self.reload is None:
            return
        before = self.options
        try:  # (the lease's check stays on every write)
            self.options = replace(self.reload(), guard=before.guard, stamp=before.stamp)
        except Exception as exc:  # (a rules file being written, or wrong: the old one stays)
            self.status.last_error = f"rules or manifest not reloaded: {exc}"
            self.metrics.errors.labels(**self.metrics.labels).inc()
            log.error(say("rules_not_reloaded", why=exc))
            return
        log.warning(say("rules_changed"))
        if self._rules_before is None:  # (held at once from the index; then re-listed)
            self._rules_before = before
        self.metrics.events.labels(kind="files", **self.metrics.labels).inc()
        self.status.last_event_at = time.time()
        self.everything = True
        self._wake.set()

    async def _record(self) -> None:
        queue = len(self.pending.keys)
        record = status_record(self.status, self.options, self.source, self.watch.rescan_s, queue)
        record["problems"] = dict(self.health.problems)
        if self.lease is not None:
            record["lease"] = {"name": self.lease.name, "held": self.lease.fresh}
        await self.es.index(index=self.runs, id=self.status_id, document=record)


async def _relay(stop: asyncio.Event, listening: asyncio.Event) -> None:
    await stop.wait()
    listening.set()


async def sleep_until(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
