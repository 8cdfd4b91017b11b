"""Word and PowerPoint (Office Open XML); the old and Chinese formats arrive here converted.

* ``.docx`` (python-docx): paragraphs in body order, styles ``Title`` and ``Heading N`` as
  headings, tables where they stand, a row at a time naming its columns;
* ``.pptx`` (python-pptx): each slide's title a heading, its text boxes and tables top to
  bottom, then its speaker notes;
* ``.doc``, ``.ppt`` and the other old formats are converted by LibreOffice first
  (``formats.convert``) and then read here.

Nothing in a file runs: macros are never executed, and embedded objects are not opened.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from indexer.documents import DocumentError
from indexer.formats.base import Parsed, Reading
from indexer.formats.tables import row_lines


def unpacked_size(data: bytes, reading: Reading, what: str) -> None:
    """Refuse a zip container (an Office file) whose members unpack past the budget, from its
    directory, before any member is opened; a member that lies about its size is caught by
    ``zipfile`` when read (it checks the CRC and stops at the declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            total = sum(member.file_size for member in members)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentError(f"{what} cannot be read: {type(exc).__name__}") from exc
    reading.budget.check_unpacked(total, len(members))


def _table_rows(table: Any) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:  # a merged cell repeats: keep it once
            text = cell.text.strip()
            cells.append("" if cells and cells[-1] == text and text else text)
        rows.append(cells)
    return rows


def parse_docx(data: bytes, reading: Reading) -> Parsed:
    import docx
    from docx.table import Table

    unpacked_size(data, reading, "DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises what zipfile and lxml raise on damage
        raise DocumentError(f"DOCX cannot be read: {type(exc).__name__}") from exc
    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines.extend(row_lines(_table_rows(block)))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        if style == "Title":
            lines.append(f"# {text}")
        elif style.startswith("Heading ") and style[8:].isdigit():
            lines.append(f"{'#' * min(int(style[8:]), 6)} {text}")
        else:
            lines.append(text)
    title = (document.core_properties.title or "").strip() or None
    return Parsed.of("\n\n".join(lines), title=title, info={"format": "docx"})


def _shape_texts(shapes: Any) -> Iterator[tuple[float, float, str]]:
    """(top, left, text) of each text box and table among ``shapes``, groups opened."""
    for shape in shapes:
        top, left = float(shape.top or 0), float(shape.left or 0)
        if shape.shape_type is not None and int(shape.shape_type) == 6:  # a group
            yield from _shape_texts(shape.shapes)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = [[cell.text.strip() for cell in row.cells] for row in shape.table.rows]
            yield top, left, "\n\n".join(row_lines(rows))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            paragraphs = [p.text.strip() for p in shape.text_frame.paragraphs]
            text = "\n".join(p for p in paragraphs if p)
            if text:
                yield top, left, text


def parse_pptx(data: bytes, reading: Reading) -> Parsed:
    from pptx import Presentation

    unpacked_size(data, reading, "PPTX")
    try:
        deck = Presentation(io.BytesIO(data))
    except Exception as exc:  # python-pptx raises what zipfile and lxml raise on damage
        raise DocumentError(f"PPTX cannot be read: {type(exc).__name__}") from exc
    slides = list(deck.slides)
    reading.budget.check_pages(len(slides), "the deck has", "slides")
    out: list[str] = []
    first_title: str | None = None
    for slide in slides:
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        title = " ".join(title.split())
        first_title = first_title or title or None
        if title:
            out.append(f"## {title}")
        skip = title_shape.shape_id if title_shape is not None else None
        shapes = [s for s in slide.shapes if s.shape_id != skip]
        for _, _, text in sorted(_shape_texts(shapes), key=lambda t: (round(t[0] / 1e5), t[1])):
            out.append(text)
        if slide.has_notes_slide:
            notes = (slide.notes_slide.notes_text_frame.text or "").strip()
            if notes:
                out.append(notes)
    title = (deck.core_properties.title or "").strip() or first_title
    info = {"format": "pptx", "pages": len(slides)}
    return Parsed.of("\n\n".join(out), title=title, info=info)
