"""What one document may cost the indexer (issue #37 §1; docs/indexer.md, "Limits").

Defaults a real corpus never meets; each is an option of ``retrieval-indexer index``. A
document over one is a failed document whose reason names the limit, its value and the
option; the run goes on.

| limit | option | default | checked |
|---|---|---|---|
| time | ``--doc-timeout`` | 300 s | parse and chunk, in a worker killed when it passes it |
| memory | ``--doc-memory-mb`` | from ``--memory-mb`` | a worker's address space past its start |
| bytes | ``--max-doc-bytes`` | 128 MiB | the object's listed size, before it is read |
| unpacked | ``--max-unpacked-bytes`` | 512 MiB | an Office (zip) file's members, before one opens |
| text | ``--max-chars`` | 50,000,000 | characters of the parsed text |
| pages | ``--max-pages`` | 10,000 | pages of a PDF, before one is read |
"""

from __future__ import annotations

from dataclasses import dataclass

from indexer.documents import DocumentError

MIB = 1024 * 1024
# The indexer itself: its libraries, the local embedding model, one batch of chunks, and the
# objects in flight (at most --max-doc-bytes of them, 128 MiB by default).
RUN_BASE_MB = 400
WORKER_BASE_MB = 100  # a worker after start: the parsers and the word segmenter loaded
MIN_DOC_MB = 128  # less than this per document, and ordinary PDFs start to fail


def split_memory(
    total_mb: int, cores: int, workers: int | None = None, doc_mb: int | None = None
) -> tuple[int, int]:
    """Workers and memory per document that keep a run within ``total_mb`` (``--memory-mb``):
    ``RUN_BASE_MB`` + workers × (``WORKER_BASE_MB`` + per document) ≤ total. Either may be
    given; the other is derived (at least one worker, and ``MIN_DOC_MB`` where it fits)."""
    room = max(0, total_mb - RUN_BASE_MB)
    if workers is None:
        fits = room // (WORKER_BASE_MB + (doc_mb or MIN_DOC_MB))
        workers = max(1, min(cores, 8, fits))
    if doc_mb is None:
        doc_mb = max(32, room // max(1, workers) - WORKER_BASE_MB)
    return workers, doc_mb


class BudgetError(DocumentError):
    """A document over a limit of its budget; the message names the limit and the option."""


@dataclass(frozen=True, slots=True)
class Budget:
    """The limits of one document (see the module's table)."""

    seconds: float = 300.0
    memory_mb: int = 256
    max_bytes: int = 128 * MIB
    max_unpacked_bytes: int = 512 * MIB
    max_chars: int = 50_000_000
    max_pages: int = 10_000

    def check_bytes(self, size: int) -> None:
        """Refuse an object of ``size`` bytes before it is downloaded."""
        if size > self.max_bytes:
            raise BudgetError(
                f"the object is {size:,} bytes, over the limit of {self.max_bytes:,} "
                "(--max-doc-bytes)"
            )

    def check_chars(self, chars: int) -> None:
        """Refuse a parsed text of ``chars`` characters."""
        if chars > self.max_chars:
            raise BudgetError(
                f"the text is {chars:,} characters, over the limit of {self.max_chars:,} "
                "(--max-chars)"
            )

    def check_pages(self, pages: int) -> None:
        """Refuse a PDF of ``pages`` pages before its pages are read."""
        if pages > self.max_pages:
            raise BudgetError(
                f"the PDF has {pages:,} pages, over the limit of {self.max_pages:,} (--max-pages)"
            )

    def check_unpacked(self, unpacked: int) -> None:
        """Refuse a zip container whose members unpack to ``unpacked`` bytes."""
        if unpacked > self.max_unpacked_bytes:
            raise BudgetError(
                f"the file unpacks to {unpacked:,} bytes, over the limit of "
                f"{self.max_unpacked_bytes:,} (--max-unpacked-bytes)"
            )

    def timed_out(self) -> BudgetError:
        """The failure of a document that passed its deadline."""
        return BudgetError(
            f"parsing took longer than {self.seconds:g} s (--doc-timeout); the worker was stopped"
        )

    def out_of_memory(self) -> BudgetError:
        """The failure of a document that needed more than its memory."""
        return BudgetError(
            f"parsing needed more than {self.memory_mb} MB (--doc-memory-mb); the worker was "
            "replaced"
        )
