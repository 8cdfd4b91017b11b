"""PDF: the text layer with its layout read back, and pages without one read by OCR.

pdfplumber (on pdfminer.six) gives each word with its box, font and size, and finds ruled
tables; pypdfium2 opens the file first (a password or a damaged file is refused before
anything else is read), counts its pages against ``--max-pages`` and renders the pages that
need OCR. From the words, page by page:

* **reading order** — a page with an empty vertical band near its middle that splits its
  words into two substantial columns is read column by column; a line that crosses the band
  (a title, a running header) separates the page into bands read in turn;
* **tables** — a ruled table is taken out of the text flow and written a row at a time, each
  row naming its columns (``indexer.formats.tables``), where it stands on the page;
* **headings** — a short line in a font clearly larger than the body's (or bold at the body's
  size) becomes a Markdown heading, levels by size, so it starts a chunk;
* **running headers and footers** — a line in the top or bottom 7 % of the page that recurs
  (digits aside) on half the pages or more, and page numbers (``12``, ``- 12 -``, ``第 12 页``,
  ``12 / 40``), are dropped.

A page whose text layer is empty, or mostly glyphs without text (``(cid:N)``, private-use
characters), or a full-page image with a few words over it, is read by OCR in ``auto`` mode
(``indexer.formats.ocr``); ``force`` reads every page by OCR, ``off`` none.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from indexer.documents import DocumentError
from indexer.formats.base import Parsed, Part, Reading, glue
from indexer.formats.ocr import ocr_part, read_pixels
from indexer.formats.tables import row_lines

for _name in ("pdfminer", "pdfplumber", "pypdfium2"):
    logging.getLogger(_name).setLevel(logging.ERROR)

OCR_DPI = 200
# Of the page height: where running headers and footers live. A line wholly inside the band
# is a candidate (Word puts its header 36 pt from the edge and the body at 72 pt: 4 % and 9 %
# of an A4 page).
MARGIN = 0.07
_PAGE_NUMBER = re.compile(
    r"^(?:第\s*\d+\s*页(?:\s*[/，,]?\s*共\s*\d+\s*页)?|[-–—]?\s*\d+\s*[-–—]?|\d+\s*/\s*\d+|"
    r"(?:page|p\.)\s*\d+(?:\s*(?:of|/)\s*\d+)?)$",
    re.IGNORECASE,
)
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)


@dataclass(slots=True)
class Line:
    """A line (or a table) of a page, in reading order."""

    top: float
    bottom: float
    text: str
    size: float
    bold: bool
    table: bool = False
    margin: bool = False  # wholly in the top or bottom band: a running header or footer?
    heading: int = 0  # its level, once headings are known


def _join(words: list[str]) -> str:
    out = ""
    for word in words:
        out += glue(out, word) + word if out else word
    return out


def _lines(words: list[dict[str, Any]]) -> list[Line]:
    from pdfplumber.utils.clustering import cluster_objects

    lines = []
    for group in cluster_objects(words, lambda w: (w["top"] + w["bottom"]) / 2, 2.5):
        group.sort(key=lambda w: w["x0"])
        sizes = sorted(float(w["size"]) for w in group)
        lines.append(
            Line(
                top=min(float(w["top"]) for w in group),
                bottom=max(float(w["bottom"]) for w in group),
                text=_join([w["text"] for w in group]),
                size=sizes[len(sizes) // 2],
                bold=all(_BOLD.search(str(w.get("fontname", ""))) for w in group),
            )
        )
    lines.sort(key=lambda line: line.top)
    return lines


def _gutter(words: list[dict[str, Any]], width: float, height: float) -> float | None:
    """The x of the band between two columns, or None for a page of one column."""
    body = [w for w in words if MARGIN * height < w["top"] < (1 - MARGIN) * height]
    if len(body) < 10:
        return None
    low, high = int(width * 0.3), int(width * 0.7)
    cover = [0] * (high - low + 1)
    for w in body:
        for col in range(max(low, int(w["x0"])), min(high, int(w["x1"])) + 1):
            cover[col - low] += 1
    best: tuple[int, int] | None = None
    start = None
    for i, count in enumerate([*cover, 99]):
        if count <= 2 and start is None:
            start = i
        elif count > 2 and start is not None:
            if i - start >= 8 and (best is None or i - start > best[1] - best[0]):
                best = (start, i)
            start = None
    if best is None:
        return None
    x = low + (best[0] + best[1]) / 2
    left = sum(1 for w in body if w["x1"] <= x)
    right = sum(1 for w in body if w["x0"] >= x)
    if min(left, right) < max(3, 0.05 * len(body)):  # (a last page may have a short column)
        return None
    return x


def _table_line(table: Any) -> Line | None:
    rows = list(row_lines(table.extract()))
    if not rows:
        return None
    _, top, _, bottom = table.bbox
    return Line(top=top, bottom=bottom, text="\n\n".join(rows), size=0.0, bold=False, table=True)


def read_layout(page: Any) -> list[Line]:
    """A page's lines and tables in reading order (see the module)."""
    tables = page.find_tables()
    boxes = [t.bbox for t in tables]

    def outside(obj: dict[str, Any]) -> bool:
        cx, cy = (obj["x0"] + obj["x1"]) / 2, (obj["top"] + obj["bottom"]) / 2
        return not any(b[0] <= cx <= b[2] and b[1] <= cy <= b[3] for b in boxes)

    flow = page.filter(lambda o: o.get("object_type") != "char" or outside(o)) if boxes else page
    height = float(page.height)

    def marginal(word: dict[str, Any]) -> bool:
        return bool(word["bottom"] < MARGIN * height or word["top"] > (1 - MARGIN) * height)

    every = flow.extract_words(extra_attrs=["size", "fontname"])
    edges = _lines([w for w in every if marginal(w)])  # across the page, columns or not
    for line in edges:
        line.margin = True
    above = [line for line in edges if line.top < height / 2]
    below = [line for line in edges if line.top >= height / 2]
    words = [w for w in every if not marginal(w)]
    placed = [(t.bbox[0], t.bbox[2], row) for t in tables if (row := _table_line(t))]
    return above + _body(words, placed, float(page.width), height) + below


def _body(
    words: list[dict[str, Any]],
    placed: list[tuple[float, float, Line]],
    width: float,
    height: float,
) -> list[Line]:
    """The lines and tables between the margins, in reading order (columns in turn)."""
    gutter = _gutter(words, width, height)
    if gutter is None:
        items = _lines(words) + [line for _, _, line in placed]
        return sorted(items, key=lambda line: line.top)
    left = [w for w in words if w["x1"] <= gutter]
    right = [w for w in words if w["x0"] >= gutter]
    across = [w for w in words if w["x0"] < gutter < w["x1"]]
    spans = _lines(across) + [line for x0, x1, line in placed if x0 < gutter < x1]
    columns = [
        _lines(left) + [line for _, x1, line in placed if x1 <= gutter],
        _lines(right) + [line for x0, _, line in placed if x0 >= gutter],
    ]
    out: list[Line] = []
    floor = float("-inf")
    for span in [*sorted(spans, key=lambda line: line.top), None]:
        ceiling = span.top if span is not None else float("inf")
        for column in columns:
            out.extend(sorted((i for i in column if floor <= i.top < ceiling), key=lambda i: i.top))
        if span is not None:
            out.append(span)
            floor = span.top
    return out


def needs_ocr(page: Any) -> bool:
    """Whether a page's text layer is missing or not text (see the module)."""
    chars = page.chars
    if not chars:
        return True
    bad = sum(
        1
        for c in chars
        if c["text"].startswith("(cid:")
        or "\ufffd" in c["text"]
        or "\ue000" <= c["text"] <= "\uf8ff"
    )
    if bad > 0.3 * len(chars):
        return True
    area = float(page.width * page.height) or 1.0
    pictured = sum(float(i["width"] * i["height"]) for i in page.images)
    return len(chars) < 30 and pictured >= 0.5 * area


def _body_size(pages: list[tuple[float, list[Line]]]) -> tuple[float, bool]:
    """The body text's font size (the size of most characters), and whether it is bold."""
    weight: Counter[float] = Counter()
    bold = total = 0
    for _, lines in pages:
        for line in lines:
            if not line.table:
                weight[round(line.size, 1)] += len(line.text)
                total += len(line.text)
                bold += len(line.text) if line.bold else 0
    return (weight.most_common(1)[0][0] if weight else 0.0), bold > 0.5 * total


def _drop_running(pages: list[tuple[float, list[Line]]]) -> None:
    """Remove running headers, footers and page numbers (see the module), in place. A line in
    a font larger than the body's is a heading, never a running header."""
    body, _ = _body_size(pages)

    def in_margin(line: Line) -> bool:
        return line.margin and line.size <= body * 1.1

    def key(text: str) -> str:
        return re.sub(r"\d+", "#", re.sub(r"\s+", "", text))

    seen: Counter[str] = Counter()
    for _, lines in pages:
        seen.update({key(line.text) for line in lines if not line.table and in_margin(line)})
    floor = max(2, len(pages) // 2)
    for _, lines in pages:
        lines[:] = [
            line
            for line in lines
            if not in_margin(line)
            or not (_PAGE_NUMBER.match(line.text.strip()) or seen[key(line.text)] >= floor)
        ]


def _mark_headings(pages: list[tuple[float, list[Line]]]) -> None:
    """Set each heading line's level from its size against the body's (see the module)."""
    body, body_bold = _body_size(pages)
    if not body:
        return
    larger = sorted(
        {round(line.size, 1) for _, ls in pages for line in ls if line.size >= body * 1.15},
        reverse=True,
    )
    for _, lines in pages:
        for line in lines:
            text = line.text.strip()
            if line.table or not text or len(text) > 80 or text[-1] in "。；;，,:：":
                continue
            size = round(line.size, 1)
            if size in larger:
                line.heading = min(larger.index(size) + 1, 4)
            elif line.bold and not body_bold and abs(size - body) < 0.5 and len(text) <= 40:
                line.heading = min(len(larger) + 1, 4)


def _page_text(lines: list[Line]) -> str:
    """A page's lines as paragraphs: a line joins the one above unless a gap, a heading or a
    table stands between."""
    out: list[str] = []
    previous: Line | None = None
    for line in lines:
        if line.heading:
            out.append(f"\n\n{'#' * line.heading} {line.text}\n\n")
        elif line.table:
            out.append(f"\n\n{line.text}\n\n")
        elif previous is None or previous.heading or previous.table:
            out.append(f"\n\n{line.text}")
        elif line.top - previous.bottom > 0.6 * max(previous.size, 1.0):
            out.append(f"\n\n{line.text}")
        else:
            out.append(glue(previous.text, line.text) + line.text)
        previous = line
    return "".join(out).strip()


_PLACEHOLDER_TITLE = re.compile(
    r"^(untitled|无标题|microsoft (word|powerpoint|excel) - .*|.*\.(docx?|pptx?|xlsx?|pdf))$",
    re.IGNORECASE,
)


def _usable_title(value: Any) -> str | None:
    """The PDF's Title property, unless it is a tool's placeholder ("untitled", "Microsoft
    Word - 草稿.docx"): then the first heading names the document."""
    title = " ".join(str(value or "").split())
    return title if title and not _PLACEHOLDER_TITLE.match(title) else None


def _open(data: bytes, reading: Reading) -> Any:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise DocumentError(
                "the PDF is password-protected: remove the password to index it"
            ) from exc
        raise DocumentError(f"PDF cannot be read: {exc}") from exc
    reading.budget.check_pages(len(document))
    return document


def _ocr_page(document: Any, index: int, reading: Reading) -> Part | None:
    import numpy as np

    page = document[index]
    width, height = page.get_size()
    scale = OCR_DPI / 72
    reading.budget.check_pixels(int(width * scale), int(height * scale))
    reading.grant(reading.budget.ocr_page_seconds)
    image = page.render(scale=scale, grayscale=False).to_pil().convert("RGB")
    page.close()
    text = read_pixels(np.asarray(image))
    return ocr_part(text, index + 1) if text.text else None


def parse_pdf(data: bytes, reading: Reading) -> Parsed:
    import pdfplumber
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psparser import PSException

    document = _open(data, reading)
    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            title = _usable_title((pdf.metadata or {}).get("Title"))
            read: list[tuple[int, Any]] = []  # (page index, its layout or the OCR part)
            for index, page in enumerate(pdf.pages):
                if reading.ocr == "force" or (reading.ocr == "auto" and needs_ocr(page)):
                    read.append((index, _ocr_page(document, index, reading)))
                else:
                    read.append((index, (float(page.height), read_layout(page))))
                page.close()
    except DocumentError:
        raise
    except (PDFSyntaxError, PSException, ValueError, KeyError, TypeError, OSError) as exc:
        raise DocumentError(f"PDF cannot be read: {type(exc).__name__}: {exc}") from exc
    finally:
        document.close()
    laid = [entry for _, entry in read if isinstance(entry, tuple)]
    _drop_running(laid)
    _mark_headings(laid)
    parts: list[Part] = []
    text: list[str] = []
    for _, entry in read:
        if isinstance(entry, tuple):
            if page_text := _page_text(entry[1]):
                text.append(page_text)
            continue
        if text:
            parts.append(Part("\n\n".join(text)))
            text = []
        if entry is not None:
            parts.append(entry)
    if text:
        parts.append(Part("\n\n".join(text)))
    ocr_pages = len(read) - len(laid)
    info = {"format": "pdf", "pages": len(read), "ocr_pages": ocr_pages}
    if not parts and reading.ocr == "off" and ocr_pages == 0 and any(not e[1] for e in laid):
        raise DocumentError("no text layer in the PDF, and --ocr is off (scanned pages need OCR)")
    return Parsed(tuple(parts), title=title, info=info)
