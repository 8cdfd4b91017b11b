"""Worker processes that parse and chunk documents, one at a time each, under a budget.

A document's parse runs where it can be stopped: in a process of its own, never a thread, so
a parser stuck in C code (a PDF library, a regular expression, a decompressor) is stopped too.
Each worker is spawned (no inherited state), imports the parsers, then caps its own address
space at what it holds plus ``Budget.memory_mb`` (``RLIMIT_AS``): an allocation past it fails
in the worker (a ``MemoryError``, or the worker dies), never grows the machine's memory. The
parent waits for each document at most ``Budget.seconds``; a worker past it is killed and a
new one started, and so is one that died or ran out of memory. Either way the document is a
failed document with the limit in its reason, and the run goes on.

A document may ask for more time while it runs: a reader sends ``(GRANT, seconds)`` before
each page it reads by OCR, and the parent moves that document's deadline by as much, so a
300-page scan is not stopped by a deadline sized for text, and a stuck page still is.

A worker is retired by what it holds, not by what it read (issue #48 §4). After each document
it measures what it keeps past its start: address space the OCR engine reserved and kept
(onnxruntime's and glibc's arenas, up to ~400 MB that is never resident) and resident memory.
Within ``HELD_ADDRESS_MB`` and ``HELD_RESIDENT_MB`` it stays, its cap moved to what it holds
plus ``Budget.memory_mb`` so the next document has its whole budget; past either, it retires
and a fresh one is started. So a folder of one-page scans loads the engine once per worker,
not once per image, and every document still gets ``--doc-memory-mb``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from indexer.budget import OCR_ADDRESS_SLACK_MB, Budget

Job = tuple[Any, ...]  # the arguments of ``document_chunks``, all picklable
Result = list[dict[str, Any]] | str  # the chunks, or why the document failed

_CONTEXT = multiprocessing.get_context("spawn")
READY = "ready"
GRANT = "grant"
START_TIMEOUT_S = 300.0  # a worker's start (its imports) on a busy machine; never a document's
SCRATCH_PREFIX = "rsvc-worker-"  # + the indexer's pid: a worker's temporary folder


@dataclass(frozen=True, slots=True)
class Parsed:
    """A document read: its chunks."""

    chunks: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Failed:
    """A document that cannot be indexed, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class OutOfMemory:
    """A document that needed more than its memory."""


Outcome = Parsed | Failed | OutOfMemory


@dataclass(frozen=True, slots=True)
class Answer:
    """A worker's one answer for a document: its outcome, and whether the worker now ends
    (it holds too much, or its heap may be in a poor state after running out of memory)."""

    outcome: Outcome
    retiring: bool = False


def settle(answer: object, budget: Budget) -> tuple[Result, bool]:
    """What a worker's answer means for its document, and whether the worker can take
    another: the one place an answer is read, however it was wrapped."""
    if not isinstance(answer, Answer):  # (never sent; a worker that did is not trusted again)
        return f"the parser worker answered {type(answer).__name__}, not a document", False
    outcome = answer.outcome
    if isinstance(outcome, Parsed):
        return outcome.chunks, not answer.retiring
    if isinstance(outcome, Failed):
        return outcome.reason, not answer.retiring
    return str(budget.out_of_memory()), False


# What a worker may keep past its start and stay: the OCR engine's kept reservation (measured:
# 370–390 MB of address space after 2–20 pages, flat after; indexer.budget's slack is what an
# OCR page is granted), and resident memory that did not go back (measured: 2 MB after 20
# pages; more means a parser leaked).
HELD_ADDRESS_MB = OCR_ADDRESS_SLACK_MB
HELD_RESIDENT_MB = 128


def _status(field: str = "VmSize") -> int:
    """A size of this process from ``/proc/self/status`` in bytes (``VmSize``: its address
    space; ``VmRSS``: resident), 0 where there is none."""
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def _address_space() -> int:
    """This process's virtual size in bytes (``VmSize``)."""
    return _status("VmSize")


def holds_too_much(held_address: int, held_resident: int) -> bool:
    """Whether a worker holding this much past its start retires (bytes)."""
    mib = 1024 * 1024
    return held_address > HELD_ADDRESS_MB * mib or held_resident > HELD_RESIDENT_MB * mib


def _cap(address_space: int) -> None:
    """Cap this process's address space at ``address_space`` bytes (no /proc: no cap, the
    deadline remains)."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (address_space, resource.RLIM_INFINITY))


def _serve(conn: Connection, memory_mb: int, ocr: bool, scratch: str) -> None:
    """A worker: cap its memory, then answer jobs until its pipe closes. Every temporary file
    it or a converter it starts makes goes into ``scratch``, which the parent removes when the
    worker ends, however it ends."""
    import tempfile

    os.environ["TMPDIR"] = tempfile.tempdir = scratch  # (LibreOffice's profile and files too)
    from indexer.documents import DocumentError
    from indexer.formats import ocr as ocr_engine
    from indexer.parsers import preload
    from indexer.reading import document_chunks  # (the parsers and the chunker, imported now)
    from retrieval_svc.search.segment import segment

    def grant(seconds: float) -> None:
        conn.send((GRANT, seconds))

    chunks_of = functools.partial(document_chunks, grant=grant)
    preload(ocr)
    segment("巡检")  # (the word segmenter loads its dictionary on first use)

    with contextlib.suppress(OSError):
        os.nice(5)  # the run's own I/O and Elasticsearch come first
    budget = memory_mb * 1024 * 1024
    start, start_resident = _address_space(), _status("VmRSS")
    _cap(start + budget)
    if ocr:  # an OCR page's reserve, given for the page only (indexer.budget)
        ocr_engine.SLACK_BYTES = OCR_ADDRESS_SLACK_MB * 1024 * 1024
    conn.send(READY)  # loaded and capped: a document's deadline starts from here
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        except MemoryError:  # (the document's bytes alone do not fit its budget)
            conn.send(Answer(OutOfMemory(), retiring=True))
            return
        outcome: Outcome
        try:
            outcome = Parsed(chunks_of(*job))
        except MemoryError:
            outcome = OutOfMemory()
        except DocumentError as exc:
            outcome = Failed(str(exc))
        except Exception as exc:  # a parser's own failure: the reason, never a crash
            outcome = Failed(f"{type(exc).__name__}: {exc}")
        del job  # (what it holds after a document is measured without the document)
        now = _address_space()
        retiring = isinstance(outcome, OutOfMemory) or holds_too_much(
            now - start, _status("VmRSS") - start_resident
        )
        if not retiring:
            _cap(max(now, start) + budget)  # (the next document: its whole budget)
        try:
            conn.send(Answer(outcome, retiring))
        except MemoryError:  # (its chunks could not be pickled within the cap)
            conn.send(Answer(OutOfMemory(), retiring=True))
            return
        if retiring:
            return  # (the parent starts a new one)


@contextlib.contextmanager
def _few_arenas() -> Any:
    """Start a worker with glibc's malloc held to two arenas: each thread of the OCR engine
    otherwise reserves an arena of 64 MB of address space, which the worker's cap counts."""
    before = os.environ.get("MALLOC_ARENA_MAX")
    os.environ["MALLOC_ARENA_MAX"] = before or "2"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MALLOC_ARENA_MAX", None)


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, budget: Budget, ocr: bool = False) -> None:
        self.budget = budget
        self.retired = False
        self.scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        self.conn, child = _CONTEXT.Pipe()
        self.process: BaseProcess = _CONTEXT.Process(
            target=_serve, args=(child, budget.memory_mb, ocr, self.scratch), daemon=True
        )
        with _few_arenas():
            self.process.start()
        child.close()
        # Wait until it is loaded: its start-up is no document's time (blocking: in a thread).
        try:
            ready = self.conn.poll(START_TIMEOUT_S) and self.conn.recv() == READY
        except (EOFError, OSError):  # it died while starting
            ready = False
        if not ready:
            self.stop()
            raise RuntimeError(f"a parser worker did not start within {START_TIMEOUT_S:g} s")

    def run(self, job: Job) -> tuple[Result, bool]:
        """The job's result, and whether this worker can take another (blocking)."""
        budget = self.budget
        granted = 0.0
        try:
            self.conn.send(job)
            deadline = time.monotonic() + budget.seconds
            while True:
                if not self.conn.poll(max(0.0, deadline - time.monotonic())):
                    return str(budget.timed_out(granted)), False
                answer = self.conn.recv()
                if not (isinstance(answer, tuple) and answer[:1] == (GRANT,)):
                    break
                granted += float(answer[1])
                deadline += float(answer[1])
        except (EOFError, OSError, BrokenPipeError):  # it died: killed for memory, or crashed
            return str(budget.out_of_memory()), False
        # Retired by its own choice (it holds too much), not replaced for its document.
        self.retired = isinstance(answer, Answer) and answer.retiring
        self.retired &= not isinstance(answer.outcome, OutOfMemory)
        return settle(answer, budget)

    def stop(self) -> None:
        """End the process now, whatever it is doing, and remove its temporary files."""
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        shutil.rmtree(self.scratch, ignore_errors=True)


def sweep_scratch(folder: str | None = None) -> int:
    """Remove the temporary folders of workers whose indexer is gone (one killed outright
    leaves them: nothing ran to remove them); how many."""
    removed = 0
    for path in Path(folder or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        owner = path.name.removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


class InFlight:
    """Bytes of objects held in the indexer at once — read, waiting for a worker, or being
    parsed — kept under ``limit``: one object of the largest size allowed, or many small ones
    (an object over ``limit`` alone waits until nothing else is held)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> Any:
        """Hold ``size`` bytes for the block (waiting until they fit)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.held == 0 or self.held + size <= self.limit)
            self.held += size
        try:
            yield
        finally:
            async with self._changed:
                self.held -= size
                self._changed.notify_all()


class ParserPool:
    """``workers`` processes that turn jobs into chunks under ``budget``; a worker that passes
    a limit is replaced. Use as ``async with ParserPool(...) as pool``."""

    def __init__(self, workers: int, budget: Budget, ocr: bool = False) -> None:
        self.budget = budget
        self.ocr = ocr  # whether each worker loads the OCR engine
        self._size = max(1, workers)
        self._idle: asyncio.Queue[_Worker | None] = asyncio.Queue()
        self._all: list[_Worker] = []
        self.replaced = 0  # workers stopped for their document (counted for the report)
        self.started = 0  # worker processes started, spares included

    async def __aenter__(self) -> ParserPool:
        await asyncio.to_thread(sweep_scratch)
        for _ in range(self._size):
            worker = await asyncio.to_thread(_Worker, self.budget, self.ocr)
            self.started += 1
            self._all.append(worker)
            self._idle.put_nowait(worker)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._stop_all)

    def _stop_all(self) -> None:
        for worker in self._all:
            worker.stop()
        self._all.clear()

    async def run(self, job: Job) -> Result:
        """The chunks of one document, or why it failed: whatever happens to its worker (it
        dies, passes a limit, or a new one cannot be started), the answer is the document's,
        and the pool keeps its size for the next."""
        worker = await self._idle.get()
        try:
            if worker is None:  # (a worker that could not be started before: try again)
                worker = await asyncio.to_thread(self._spare)
            result, reusable = await asyncio.to_thread(worker.run, job)
        except asyncio.CancelledError:
            await self._replace(worker, start=False)
            raise
        except Exception as exc:  # (a worker that did not start, a pipe that broke)
            await self._replace(worker)
            return f"{type(exc).__name__}: {exc}"
        if not reusable:
            self.replaced += 0 if worker.retired else 1
            await self._replace(worker)
        else:
            self._idle.put_nowait(worker)
        return result

    async def _replace(self, worker: _Worker | None, *, start: bool = True) -> None:
        """Stop ``worker`` and put a new one in its place (or an empty place, started when a
        document next needs it: when ``start`` is false, or a new one cannot start now)."""
        if worker is not None:
            await asyncio.to_thread(worker.stop)
            with contextlib.suppress(ValueError):
                self._all.remove(worker)
        spare: _Worker | None = None
        if start:
            with contextlib.suppress(Exception):
                spare = await asyncio.to_thread(self._spare)
        self._idle.put_nowait(spare)

    def _spare(self) -> _Worker:
        worker = _Worker(self.budget, self.ocr)
        self.started += 1
        self._all.append(worker)
        return worker

    @property
    def pids(self) -> Sequence[int]:
        """The worker processes now (for peak-memory measurements)."""
        return [w.process.pid for w in self._all if w.process.pid is not None]
