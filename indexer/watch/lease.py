"""One watcher per source and shard: a lease kept in Elasticsearch.

The lease is a document in the tenant's runs index (``<kb>@watch-lease``, or per shard), taken
and renewed with Elasticsearch's optimistic concurrency (``if_seq_no`` / ``if_primary_term``):
of two watchers that read the same lease, one write wins and the other is refused. A watcher
waits while another holds an unexpired lease, renews its own every third of ``ttl_s``, and
stops working the moment a renewal fails — so two never write at once, even across a network
partition longer than the lease.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import Any

from elasticsearch import AsyncElasticsearch, ConflictError, NotFoundError

from retrieval_svc.search.runs import LEASE, ensure_runs_index

log = logging.getLogger(__name__)


class LeaseLost(RuntimeError):
    """Another watcher holds the lease now."""


class Lease:
    """A lease on ``lease_id`` in ``index`` for ``ttl_s`` seconds."""

    def __init__(
        self, es: AsyncElasticsearch, index: str, lease_id: str, ttl_s: float = 30.0
    ) -> None:
        self.es, self.index, self.id, self.ttl_s = es, index, lease_id, ttl_s
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._seq: tuple[int, int] | None = None
        self._until = 0.0  # (monotonic) the lease is ours for sure until then

    @property
    def fresh(self) -> bool:
        """Whether the lease is surely still ours for another third of its time."""
        return self._seq is not None and time.monotonic() < self._until - self.ttl_s / 3

    def _body(self) -> dict[str, Any]:
        return {"kind": LEASE, "holder": self.holder, "expires_at": time.time() + self.ttl_s}

    async def acquire(self, stop: asyncio.Event | None = None) -> bool:
        """Take the lease, waiting while another watcher holds it (False: stopped first)."""
        await ensure_runs_index(self.es, self.index)
        said = False
        while stop is None or not stop.is_set():
            if await self._try():
                return True
            if not said:
                log.warning("another watcher holds %s: waiting for its lease to lapse", self.id)
                said = True
            await asyncio.sleep(min(5.0, self.ttl_s / 3))
        return False

    async def _try(self) -> bool:
        try:
            found = await self.es.get(index=self.index, id=self.id)
        except NotFoundError:
            try:
                made = await self.es.create(
                    index=self.index, id=self.id, document=self._body(), refresh=True
                )
            except ConflictError:
                return False
            self._seq = (made["_seq_no"], made["_primary_term"])
            self._until = time.monotonic() + self.ttl_s  # (a little late: on the safe side)
            return True
        body = found["_source"]
        if body.get("holder") != self.holder and float(body.get("expires_at", 0)) > time.time():
            return False
        return await self._write(found["_seq_no"], found["_primary_term"])

    async def _write(self, seq_no: int, primary_term: int) -> bool:
        sent = time.monotonic()
        try:
            done = await self.es.index(
                index=self.index,
                id=self.id,
                document=self._body(),
                if_seq_no=seq_no,
                if_primary_term=primary_term,
                refresh=True,
            )
        except ConflictError:
            return False
        self._seq = (done["_seq_no"], done["_primary_term"])
        self._until = sent + self.ttl_s
        return True

    async def renew(self) -> None:
        """Extend the lease; LeaseLost when another watcher took it meanwhile."""
        if self._seq is None or not await self._write(*self._seq):
            self._seq = None
            raise LeaseLost(f"the lease {self.id} was taken by another watcher")

    async def release(self) -> None:
        """Give the lease up (another watcher may take it at once)."""
        if self._seq is None:
            return
        try:
            await self.es.delete(
                index=self.index,
                id=self.id,
                if_seq_no=self._seq[0],
                if_primary_term=self._seq[1],
                refresh=True,
            )
        except (ConflictError, NotFoundError):
            pass
        self._seq = None
