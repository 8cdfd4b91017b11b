"""A batch of objects loaded for the pipeline (``indexer.pipeline``): each object's roles from
outside its bytes (folder rule, roles tag), then its bytes read and parsed into chunks — in the
worker processes under the memory budget, or in threads for a library caller. Failures become
the object's reason; nothing here writes."""

from __future__ import annotations

import asyncio
from typing import Any

from indexer.documents import DocumentError
from indexer.loading import IndexOptions, chunk_settings, load_document, outside_of, read_document
from indexer.permissions import Outside
from indexer.sources import ObjectRef, Source
from indexer.workers import InFlight, ParserPool


class BatchLoader:
    """How one run reads: at most ``concurrency`` objects read at once, at most the budget's
    bytes held, in ``pool``'s worker processes once the run has started them."""

    def __init__(self, source: Source, options: IndexOptions) -> None:
        self.source, self.options = source, options
        self.pool: ParserPool | None = None  # worker processes, when options.workers
        self.reading = asyncio.Semaphore(max(1, options.concurrency))
        self.in_flight = InFlight(options.budget.max_bytes)
        self.settings = chunk_settings(options)

    async def outside(self, refs: list[ObjectRef]) -> dict[str, Outside | str]:
        """Each object's folder rule and roles tag (tags read in ``concurrency`` threads), or
        why they could not be read."""
        options = self.options

        def one(ref: ObjectRef) -> Outside | str:
            try:
                return outside_of(self.source, ref, options)
            except DocumentError as exc:
                return str(exc)
            except Exception as exc:  # (anything else from one object fails that object)
                return f"{type(exc).__name__}: {exc}"

        if not options.roles_tag:  # (no I/O: the rules alone)
            return {ref.key: one(ref) for ref in refs}

        async def limited(ref: ObjectRef) -> Outside | str:
            async with self.reading:
                return await asyncio.to_thread(one, ref)

        found = await asyncio.gather(*(limited(ref) for ref in refs))
        return {ref.key: here for ref, here in zip(refs, found, strict=True)}

    async def load(
        self, refs: list[ObjectRef], outside: dict[str, Outside | str]
    ) -> list[tuple[ObjectRef, Any]]:
        """Parse ``refs``: in the worker processes (reading in ``concurrency`` threads), or
        in ``concurrency`` threads each taking every n-th object."""
        found = {k: v for k, v in outside.items() if isinstance(v, Outside)}
        if self.pool is not None:
            return list(await asyncio.gather(*(self._in_worker(r, found[r.key]) for r in refs)))
        n = max(1, min(self.options.concurrency, len(refs)))
        parts = await asyncio.gather(
            *(asyncio.to_thread(self._parse, refs[i::n], found) for i in range(n))
        )
        return [item for part in parts for item in part]

    async def _in_worker(
        self, ref: ObjectRef, outside: Outside
    ) -> tuple[ObjectRef, list[dict[str, Any]] | str]:
        """Read one object here, parse and chunk it in a worker under the budget."""
        assert self.pool is not None
        try:
            self.options.budget.check_bytes(ref.size)  # (before holding anything for it)
        except DocumentError as exc:
            return ref, str(exc)
        # The object's bytes count from its read until its worker is done with them: the
        # run's memory holds at most --max-doc-bytes of objects, however many are listed.
        async with self.in_flight.hold(max(1, ref.size)):
            async with self.reading:  # (at most ``concurrency`` objects read at once)
                try:
                    job = await asyncio.to_thread(
                        read_document, self.source, ref, self.options, outside
                    )
                except DocumentError as exc:
                    return ref, str(exc)
                except Exception as exc:  # a read error: report it, keep going
                    return ref, f"{type(exc).__name__}: {exc}"
            return ref, await self.pool.run((*job, self.settings))

    def _parse(
        self, refs: list[ObjectRef], outside: dict[str, Outside]
    ) -> list[tuple[ObjectRef, list[dict[str, Any]] | str]]:
        """Read and parse some objects (in a worker thread); failures become their reason."""
        out: list[tuple[ObjectRef, list[dict[str, Any]] | str]] = []
        for ref in refs:
            try:
                out.append((ref, load_document(self.source, ref, self.options, outside[ref.key])))
            except DocumentError as exc:
                out.append((ref, str(exc)))
            except Exception as exc:  # a read error: report it, keep going
                out.append((ref, f"{type(exc).__name__}: {exc}"))
        return out
