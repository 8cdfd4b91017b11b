"""One writer at a time for each (knowledge base, source, shard): a lease in Elasticsearch that
every writer takes — the watcher, ``index`` (the nightly CronJob or by hand), each shard of
either, a second watcher — and checks before each write.

**One document per source.** The lease of a knowledge base's source is one document in the
tenant's runs index (``<kb>@lease-<digest of the source's name>``) holding a *slot* per
holder: ``*`` for the whole source, ``I/N`` for a shard. Two slots that share a document
conflict (``*`` with any; ``I/N`` with ``I/N`` and with a shard of another count), so the
shards of one layout run side by side and nothing else writes beside them. Every change of the
document is written with ``if_seq_no``/``if_primary_term``: of two writers that read it, one
write wins and the other reads again — so no two overlapping slots are ever held at once.

**Held until taken, not until late.** A holder renews its slot every third of ``ttl_s``; a
renewal that comes late (a busy machine, a process stopped for a while) still succeeds unless
another writer has taken the slot meanwhile: a lone holder never loses its lease to its own
lateness. ``check``, called before every write, renews when the lease is not surely held for
another third of its time, so a writer that was stopped past its time finds out *before* it
writes (``LeaseLost``), never after.

**Enforced by Elasticsearch where a write can carry a version.** Each acquisition gets a
number above the last (``next_number``); ``version`` makes each write's version from it and a
count of writes, which chunk writes and deletions carry as ``external_gte``: an earlier
holder's write that lands late, over a chunk a later holding wrote or deleted, is refused. A
hold is such a write too: each chunk read back and written whole (``indexer.watch.hold``).

**A dead holder's lease.** It lapses ``ttl_s`` after its last renewal (10 s by default) — and
at once for its own successor: a holder records its name (``--lease-name``, by default the
host's), role, host, boot and process (``indexer.holder``); a writer of the same name and
role that finds the recorded process gone from this host (and its PID namespace) takes over
without waiting, and one started under a configured name takes over from that name on any
host or in any namespace (the operator's word that only one runs). A holder of the same
default name in another PID namespace of this host (two containers sharing the host's name)
cannot be judged: it is waited out, never taken from.

**The nightly run goes first.** ``index`` waiting for a slot a watcher holds says so in the
document (``wanted``); the watcher sees it at its next renewal, stops writing, steps aside
and takes its slot again once the run is over, with what it heard meanwhile kept. So a run and
a watcher never write at once, and what the run read before a change the watcher hears is
settled after the run by the watcher.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import time
import uuid
from typing import Any

from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConflictError,
    NotFoundError,
    TransportError,
)

from indexer.holder import Process
from indexer.shards import Shard
from retrieval_svc.search.runs import (
    LEASE,
    MAX_LEASE_S,
    ensure_runs_index,
    live_until,
    slot_name,
)
from retrieval_svc.words import say

log = logging.getLogger("indexer.watch.lease")

WHOLE = "*"
DEFAULT_TTL_S = 10.0
MAX_TTL_S = MAX_LEASE_S  # (a longer lease would look forged to every other writer)


class LeaseLost(RuntimeError):
    """Another writer holds the slot now: nothing more may be written."""


class SteppedAside(LeaseLost):
    """An ``index`` run of the same source waits: the watcher stepped aside until it is
    over."""


def slot_of(shard: Shard | None) -> str:
    """The slot of a writer of ``shard`` (None: the whole source)."""
    return WHOLE if shard is None else f"{shard.index}/{shard.count}"


def overlap(one: str, other: str) -> bool:
    """Whether two slots may write the same document."""
    if WHOLE in (one, other):
        return True
    (i, n), (j, m) = (tuple(map(int, s.split("/"))) for s in (one, other))
    return n != m or i == j


EPOCH = 1_577_836_800  # (2020-01-01: a holding's number is seconds since then, at least)


def next_number(stored: object, now: float) -> int:
    """The number of a new holding: one above the last (a number not believable — not an
    integer, ahead of the clock by more than a day — is passed over), and never below the
    seconds since ``EPOCH`` (a lease record lost starts again above every earlier one)."""
    floor = int(now) - EPOCH
    if isinstance(stored, bool) or not isinstance(stored, int) or stored > floor + 86_400:
        return floor
    return max(stored + 1, floor)


def lease_id(knowledge_id: str, source: str) -> str:
    """The lease document of ``source`` (its recorded name) in ``knowledge_id``."""
    return f"{knowledge_id}@lease-{hashlib.sha256(source.encode()).hexdigest()[:24]}"


class Lease:
    """The lease of ``source`` (its recorded name) of ``knowledge_id`` for ``shard``, in the
    runs index ``index``, held as ``role`` (``watch`` or ``index``) under ``name``."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        index: str,
        knowledge_id: str,
        source: str,
        shard: Shard | None = None,
        *,
        role: str = "watch",
        name: str = "",
        ttl_s: float = DEFAULT_TTL_S,
    ) -> None:
        # (each request bounded by a third of the lease: a stalled cluster is an error in
        # seconds, said and shown, never a renewal that hangs past the lease)
        ttl_s = min(ttl_s, MAX_TTL_S)
        self.es = es.options(request_timeout=max(2.0, ttl_s / 3))
        self.index, self.ttl_s, self.role = index, ttl_s, role
        self.knowledge_id, self.source, self.slot = knowledge_id, source, slot_of(shard)
        self.id = lease_id(knowledge_id, source)
        self.process = Process.here()
        self.name, self.named = name or self.process.host, bool(name)
        self.token = uuid.uuid4().hex
        self.wanted = False  # an index run waits for this slot (a watcher steps aside)
        self.blocker: dict[str, Any] | None = None  # who held it at the last try
        self._held = False
        self._since = 0.0
        self._until = 0.0  # (monotonic) surely ours until then
        self._lock = asyncio.Lock()
        self.number = 0  # this holding's number (``version``), raised at every acquisition
        self._writes = itertools.count(1)

    @property
    def fresh(self) -> bool:
        """Whether the lease is surely still ours for another third of its time."""
        return self._held and time.monotonic() < self._until - self.ttl_s / 3

    def _entry(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "name": self.name,
            "role": self.role,
            **self.process.as_json(),
            "since": self._since,
            "expires_at": time.time() + self.ttl_s,
        }

    async def _read(self) -> tuple[dict[str, Any], int, int] | None:
        try:
            found = await self.es.get(index=self.index, id=self.id)
        except NotFoundError:
            return None
        return dict(found["_source"]), found["_seq_no"], found["_primary_term"]

    async def _write(self, body: dict[str, Any], seq: tuple[int, int] | None) -> bool:
        """Write the document as read at ``seq`` (None: not there yet); False when another
        writer changed it first."""
        try:
            if seq is None:
                await self.es.create(index=self.index, id=self.id, document=body, refresh=True)
            else:
                await self.es.index(
                    index=self.index, id=self.id, document=body,
                    if_seq_no=seq[0], if_primary_term=seq[1], refresh=True,
                )  # fmt: skip
        except ConflictError:
            return False
        return True

    def _fresh_parts(self, body: dict[str, Any], now: float) -> tuple[dict[str, Any], ...]:
        """The record's unexpired slots and wants (and ours, expired or not). A slot or a
        want that cannot be read (not a slot's name, not a time, a time further ahead than
        any lease lasts) is none: a record written by anyone else never stops a writer, nor holds a
        source for ever."""
        found_slots, found_wanted = body.get("slots"), body.get("wanted")
        slots = {
            slot: entry
            for slot, entry in (found_slots.items() if isinstance(found_slots, dict) else ())
            if isinstance(entry, dict)
            and slot_name(slot)
            and (
                live_until(entry.get("expires_at"), now) is not None
                or entry.get("token") == self.token
            )
        }
        wanted = {
            token: want
            for token, want in (found_wanted.items() if isinstance(found_wanted, dict) else ())
            if isinstance(want, dict)
            and slot_name(want.get("slot"))
            and live_until(want.get("until"), now) is not None
        }
        return slots, wanted

    def _predecessor(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` is this writer's own predecessor, surely gone (or, under a
        configured name, on another host): its slot is taken over at once."""
        if entry.get("role") != self.role or entry.get("name") != self.name:
            return False
        if self.process.gone(entry):
            return True
        return self.named and self.process.elsewhere(entry)

    async def _try(self) -> bool:
        read = await self._read()
        now = time.time()
        body, seq = (read[0], (read[1], read[2])) if read else ({}, None)
        slots, wanted = self._fresh_parts(body, now)
        self.blocker = None
        for slot, entry in list(slots.items()):
            if entry.get("token") == self.token or not overlap(slot, self.slot):
                continue
            if self._predecessor(entry):
                log.warning(
                    say("lease_takeover", source=self.source, host=entry.get("host"),
                        pid=entry.get("pid"))
                )  # fmt: skip
                del slots[slot]
                continue
            self.blocker = entry
        if self.blocker is None and self.role == "watch":  # (a run waiting goes first)
            self.blocker = next(
                (
                    want
                    for token, want in wanted.items()
                    if token != self.token and overlap(str(want.get("slot")), self.slot)
                ),
                None,
            )
        if self.blocker is not None:
            if self.role == "index":  # (the watcher steps aside for it at its next renewal)
                wanted[self.token] = {
                    "slot": self.slot,
                    "until": now + self.ttl_s,
                    "name": self.name,
                    "role": self.role,
                    "host": self.process.host,
                    "pid": self.process.pid,
                }
                await self._write({**body, "slots": slots, "wanted": wanted}, seq)
            return False
        wanted.pop(self.token, None)
        self._since = self._since or now
        slots[self.slot] = self._entry()
        sent = time.monotonic()
        number = next_number(body.get("number"), now)
        record = {"kind": LEASE, "knowledge_id": self.knowledge_id, "source": self.source,
                  "number": number}  # fmt: skip
        if not await self._write({**record, "slots": slots, "wanted": wanted}, seq):
            return False
        self._held, self._until = True, sent + self.ttl_s
        self.number, self._writes = number, itertools.count(1)
        return True

    def version(self) -> int:
        """The version a write under this holding carries (``external_gte``): its number,
        then a count of its writes — above every write of an earlier holding, so
        Elasticsearch refuses an earlier holder's write that lands late."""
        return (self.number << 32) | min(next(self._writes), (1 << 32) - 1)

    async def acquire(self, stop: asyncio.Event | None = None, wait_s: float | None = None) -> bool:
        """Take the lease, waiting while another writer holds it (False: ``stop`` was set,
        or ``wait_s`` passed, first)."""
        said = False
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while stop is None or not stop.is_set():
            try:
                await ensure_runs_index(self.es, self.index)
                if await self._try():
                    return True
            except (ApiError, TransportError) as exc:  # (a new index starting, a cluster away)
                log.warning(say("lease_not_read", source=self.source, why=str(exc)[:300]))
                self.blocker = None
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if not said and self.blocker is not None:
                b = self.blocker
                log.warning(
                    say("lease_waiting", holder=b.get("name"), role=b.get("role"),
                        host=b.get("host"), pid=b.get("pid"), source=self.source)
                )  # fmt: skip
                said = True
            if stop is None:
                await asyncio.sleep(1.0)
            else:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=1.0)
                except TimeoutError:
                    pass
        return False

    async def renew(self) -> None:
        """Extend the lease (however late); ``LeaseLost`` when another writer took it."""
        async with self._lock:
            await self._renew()

    async def _renew(self) -> None:
        while self._held:
            read = await self._read()
            now = time.time()
            body, seq = (read[0], (read[1], read[2])) if read else ({}, None)
            slots, wanted = self._fresh_parts(body, now)
            entry = slots.get(self.slot)
            if read is None or entry is None or entry.get("token") != self.token:
                self._held = False
                taker = (entry or {}).get("name") or "?"
                raise LeaseLost(say("lease_taken", source=self.source, holder=taker))
            self.wanted = self.role == "watch" and any(
                token != self.token and overlap(str(want.get("slot")), self.slot)
                for token, want in wanted.items()
            )
            slots[self.slot] = self._entry()
            sent = time.monotonic()
            if await self._write({**body, "slots": slots, "wanted": wanted}, seq):
                self._until = sent + self.ttl_s
                return
            # (another writer changed the document — a shard's renewal, a run's want: read
            # again; only a slot taken loses the lease)
        raise LeaseLost(say("lease_taken", source=self.source, holder="?"))

    async def check(self) -> None:
        """Before a write: ``LeaseLost`` unless the lease is surely ours for a while yet
        (renewed first when it is not)."""
        if self.fresh:
            return
        async with self._lock:
            if not self.fresh:
                await self._renew()

    async def release(self) -> None:
        """Give the slot up (another writer may take it at once)."""
        async with self._lock:
            if not self._held:
                return
            self._held = False
            for _ in range(10):
                read = await self._read()
                if read is None:
                    return
                body, seq = read[0], (read[1], read[2])
                slots, wanted = self._fresh_parts(body, time.time())
                if (slots.get(self.slot) or {}).get("token") != self.token:
                    return
                del slots[self.slot]
                if await self._write({**body, "slots": slots, "wanted": wanted}, seq):
                    return
