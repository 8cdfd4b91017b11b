"""What one document may cost the indexer (issue #37 §1; docs/indexer.md, "Limits").

Defaults a real corpus never meets; each is an option of ``retrieval-indexer index``. A
document over one is a failed document whose reason names the limit, its value and the
option; the run goes on.

| limit | option | default | checked |
|---|---|---|---|
| time | ``--doc-timeout`` | 300 s | parse and chunk, in a worker killed when it passes it |
| memory | ``--doc-memory-mb`` | from ``--memory-mb`` | a worker's address space past its start |
| bytes | ``--max-doc-bytes`` | 128 MiB | the object's listed size, before it is read |
| unpacked | ``--max-unpacked-bytes`` | 512 MiB | an archive's members, before any reader sees one |
| entries | (fixed) | 50,000 | an archive's members, counted with the unpacked bytes |
| text | ``--max-chars`` | 50,000,000 | characters of the parsed text |
| pages | ``--max-pages`` | 10,000 | pages of a PDF or TIFF, a deck's slides, a book's sheets |
| pixels | ``--max-pixels`` | 120,000,000 | an image (or a scanned page) before it is decoded |
| OCR time | ``--ocr-page-seconds`` | 60 s | added to the deadline for each page read by OCR |
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
# With OCR: the engine's two models loaded and run once at start (290 MB resident), and a
# document's working memory (measured: 240 MB of address space past the start over four
# scanned documents at 200 dpi, docs/indexer.md "OCR").
OCR_WORKER_BASE_MB = 290
OCR_MIN_DOC_MB = 320
# Address space an OCR worker reserves without using it: onnxruntime's and glibc's arenas grow
# in steps on the pages with the longest lines and keep the reservation (measured: 250 MB more
# address space than resident memory after 30 scanned pages, the resident memory flat). The
# cap is raised by it while a page is read by OCR; what stays reserved after a document is
# what the worker holds, its cap moved past it for the next document (or, past this much, the
# worker retires: indexer.workers.pool), so --doc-memory-mb holds for every document.
OCR_ADDRESS_SLACK_MB = 512


def split_memory(
    total_mb: int,
    cores: int,
    workers: int | None = None,
    doc_mb: int | None = None,
    *,
    ocr: bool = False,
) -> tuple[int, int]:
    """Workers and memory per document that keep a run within ``total_mb`` (``--memory-mb``):
    ``RUN_BASE_MB`` + workers × (worker base + per document) ≤ total. Either may be given;
    the other is derived (at least one worker, and the least a document needs where it fits:
    more when the workers read by OCR)."""
    base = OCR_WORKER_BASE_MB if ocr else WORKER_BASE_MB
    least = OCR_MIN_DOC_MB if ocr else MIN_DOC_MB
    room = max(0, total_mb - RUN_BASE_MB)
    if workers is None:
        fits = room // (base + (doc_mb or least))
        workers = max(1, min(cores, 8, fits))
    if doc_mb is None:
        doc_mb = max(32, room // max(1, workers) - base)
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
    max_entries: int = 50_000  # an archive's members (a real Office file has hundreds)
    max_chars: int = 50_000_000
    max_pages: int = 10_000
    max_pixels: int = 120_000_000
    ocr_page_seconds: float = 60.0

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

    def check_pages(self, pages: int, what: str = "the PDF has", unit: str = "pages") -> None:
        """Refuse a document of ``pages`` pages (slides, sheets) before one is read."""
        if pages > self.max_pages:
            raise BudgetError(
                f"{what} {pages:,} {unit}, over the limit of {self.max_pages:,} (--max-pages)"
            )

    def check_pixels(self, width: int, height: int) -> None:
        """Refuse an image of ``width`` × ``height`` before it is decoded (a decompression
        bomb is a small file of a huge image)."""
        if width * height > self.max_pixels:
            raise BudgetError(
                f"the image is {width:,} × {height:,} pixels, over the limit of "
                f"{self.max_pixels:,} (--max-pixels)"
            )

    def check_unpacked(self, unpacked: int, entries: int = 0) -> None:
        """Refuse a zip container whose ``entries`` members unpack to ``unpacked`` bytes."""
        if entries > self.max_entries:
            raise BudgetError(
                f"the file unpacks to {entries:,} entries, over the limit of "
                f"{self.max_entries:,} (a zip bomb of many small members)"
            )
        if unpacked > self.max_unpacked_bytes:
            raise BudgetError(
                f"the file unpacks to {unpacked:,} bytes, over the limit of "
                f"{self.max_unpacked_bytes:,} (--max-unpacked-bytes)"
            )

    def timed_out(self, granted: float = 0.0) -> BudgetError:
        """The failure of a document that passed its deadline (``granted``: the seconds its
        pages read by OCR added)."""
        extra = f" + {granted:g} s for its OCR pages (--ocr-page-seconds)" if granted else ""
        return BudgetError(
            f"parsing took longer than {self.seconds:g} s (--doc-timeout){extra}; the worker "
            "was stopped"
        )

    def out_of_memory(self) -> BudgetError:
        """The failure of a document that needed more than its memory."""
        return BudgetError(
            f"parsing needed more than {self.memory_mb} MB (--doc-memory-mb); the worker was "
            "replaced"
        )
