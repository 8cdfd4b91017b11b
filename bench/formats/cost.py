"""What big documents cost the indexer (issue #34 §5): a 300-page text PDF, a 300-page scanned
PDF and a 100,000-row spreadsheet, each indexed alone through the CLI with the default budget
(``--memory-mb 1024``), timed, with the peak resident memory of the indexer and its workers
read from ``/proc``. Target: under 1 GB whatever the file.

    python -m bench.formats.cost [--text-pages 300] [--scanned-pages 300] [--rows 100000]
                                [--out DIR]
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.formats import render
from bench.formats.run import CLI, load
from bench.harness import parser as harness_parser
from bench.harness.tree import run_measured
from bench.relevance.data import DEFAULT_DATA

BOUND_MB = 1024


def sections(count: int) -> Iterator[render.Section]:
    passages, _ = load(DEFAULT_DATA, 10_000, 0)
    for i in range(count):
        p = passages[i % len(passages)]
        yield p["title"], p["text"]


def text_pdf(pages: int) -> bytes:
    """A born-digital PDF of about ``pages`` pages (a passage is about a third of a page)."""
    return render.pdf(list(sections(int(pages * 3.4))))


def scanned_pdf(pages: int) -> bytes:
    """A PDF of ``pages`` pictures of text, built a page at a time (pypdf joins them)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    source = sections(pages * 4)
    made = 0
    while made < pages:
        images = render.page_images([next(source) for _ in range(4)])
        for image in images[: pages - made]:
            buf = io.BytesIO()
            image.save(buf, format="PDF", resolution=render.DPI)
            writer.add_page(PdfReader(io.BytesIO(buf.getvalue())).pages[0])
            made += 1
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def big_sheet(rows: int) -> bytes:
    """A workbook of one sheet of ``rows`` equipment records under a header row (written by
    openpyxl's streaming writer)."""
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("设备台账")
    sheet.append(["编号", "设备", "型号", "额定容量", "巡检周期", "位置"])
    for i in range(rows):
        sheet.append(
            [f"EQ-{i:06d}", "干式变压器", f"SCB13-{800 + i % 5 * 200}", f"{800 + i % 5 * 200} kVA",
             "每两周", f"{i % 40 + 1} 号楼配电房"]
        )  # fmt: skip
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def index_one(name: str, data: bytes, es_url: str, pages: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        (folder / name).write_bytes(data)
        env = {
            **os.environ,
            "RSVC_ES_URL": es_url,
            "RSVC_INDEX_ALIAS": "bench-format-cost",
            "RSVC_EMBEDDER": "none",
        }
        argv = [*CLI, "index", str(folder), "--knowledge-id", "cost", "--json", "--force"]
        started = time.perf_counter()
        run = run_measured(argv, env=env, timeout_s=4 * 3600)
        seconds = time.perf_counter() - started
        report = json.loads(run.stdout) if run.stdout.strip() else {"failures": [run.stderr]}
        run_measured([*CLI, "delete", "--knowledge-id", "cost", "--yes"], env=env, timeout_s=600)
    peak = round(run.peak_bytes / 2**20)
    return {
        "file": name,
        "bytes": len(data),
        "pages_or_rows": pages,
        "indexed": report.get("documents_indexed", 0),
        "chunks": report.get("chunks_indexed", 0),
        "failures": [f.get("reason", f) if isinstance(f, dict) else f for f in report["failures"]],
        "seconds": round(seconds, 1),
        "per_s": round(pages / seconds, 2),
        "peak_rss_mb": peak,
        "under_bound": peak < BOUND_MB,
    }


def main(argv: list[str] | None = None) -> int:
    parser = harness_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--text-pages", type=int, default=300)
    parser.add_argument("--scanned-pages", type=int, default=300)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    cases: list[tuple[str, Callable[[], bytes], int]] = [
        ("text.pdf", lambda: text_pdf(args.text_pages), args.text_pages),
        ("rows.xlsx", lambda: big_sheet(args.rows), args.rows),
        ("scanned.pdf", lambda: scanned_pdf(args.scanned_pages), args.scanned_pages),
    ]
    rows = []
    for name, make, size in cases:
        if not size:
            continue
        data = make()
        if name.endswith(".pdf"):  # the pages it came to
            import pypdfium2

            size = len(pypdfium2.PdfDocument(data))
        row = index_one(name, data, args.es_url, size)
        print(json.dumps(row, ensure_ascii=False), flush=True)
        rows.append(row)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cost.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    ok = all(r["under_bound"] and r["indexed"] == 1 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
