"""The page's text from what the OCR engine found on it: boxes and their lines, in reading order.

``level`` turns the boxes of a page that went through the feeder at an angle level; ``layout``
groups the boxes into visual lines, paragraphs, headings and tables (issue #34 §2, #48 §3).
Nothing here runs the engine (``indexer.formats.ocr``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from indexer.formats.base import glue
from indexer.formats.tables import row_lines


def _glyph_size(box: Any, text: str) -> float:
    """A line's glyph size: its width per character (a Latin character counts half)."""
    width = float(max(p[0] for p in box) - min(p[0] for p in box))
    units = sum(1.0 if ord(c) > 0x2E80 else 0.5 for c in text.strip()) or 1.0
    return width / units


def _rows(boxes: Any, spans: list[tuple[float, float]], usual: float) -> list[list[int]]:
    """The engine's boxes (top to bottom, left to right) grouped into visual lines: a box
    whose middle is within half a line of the line's, beside it, is a cell of the same line."""
    rows: list[list[int]] = []
    for i, (top, bottom) in enumerate(spans):
        middle = (top + bottom) / 2
        if rows:
            row = rows[-1]
            here = sum((spans[j][0] + spans[j][1]) / 2 for j in row) / len(row)
            if abs(middle - here) < 0.5 * usual:
                row.append(i)
                continue
        rows.append([i])
    for row in rows:
        row.sort(key=lambda j: float(min(p[0] for p in boxes[j])))
    return rows


def _grids(
    cells: list[list[str]], boxes: list[list[Any]], usual: float
) -> dict[int, list[list[str]] | None]:
    """Runs of at least three lines of two or more short cells whose left edges fall on the
    same columns: a table (a cell the engine did not find, such as a lone digit, is left
    empty; two columns of prose have long lines). Its first line maps to the table's rows,
    read as born-digital tables are (``row_lines``), its others to None."""
    out: dict[int, list[list[str]] | None] = {}

    def lefts(n: int) -> list[float]:
        return [float(min(p[0] for p in box)) for box in boxes[n]]

    def placed(n: int, columns: list[float]) -> list[str] | None:
        """Line ``n``'s cells on ``columns``, or None when one falls on none of them."""
        row = [""] * len(columns)
        for x, text in zip(lefts(n), cells[n], strict=True):
            near = min(range(len(columns)), key=lambda c: abs(columns[c] - x))
            if abs(columns[near] - x) > 1.5 * usual or row[near]:
                return None
            row[near] = text.strip()
        return row

    start = 0
    while start < len(cells):
        end = start
        while end + 1 < len(cells) and len(cells[end + 1]) >= 2 and len(cells[start]) >= 2:
            end += 1
        widest = max(range(start, end + 1), key=lambda n: len(cells[n]))
        columns = lefts(widest)
        rows = [placed(n, columns) for n in range(start, end + 1)]
        fits = end - start >= 2 and all(r is not None for r in rows)
        run = [c for r in rows if r is not None for c in r if c]
        if fits and sum(map(len, run)) <= 24 * len(run):
            out[start] = [r for r in rows if r is not None]
            out.update(dict.fromkeys(range(start + 1, end + 1)))
        start = end + 1
    return out


def level(boxes: Any, shape: tuple[int, ...]) -> Any:
    """The boxes of a page that went through the feeder at an angle, turned level about the
    page's middle, so lines sort and group as on a straight page. The angle is the median
    slope of the long lines' top edges; under half a degree the boxes are left as they are.
    (Recognition itself reads a slanted line well: the engine crops each box turned.)"""
    import numpy as np

    points = np.asarray(boxes, dtype=np.float64)
    dx = points[:, 1, 0] - points[:, 0, 0]
    dy = points[:, 1, 1] - points[:, 0, 1]
    height = np.hypot(points[:, 3, 0] - points[:, 0, 0], points[:, 3, 1] - points[:, 0, 1])
    long = np.hypot(dx, dy) > 3 * height
    if not long.any():
        return points
    angle = float(np.median(np.arctan2(dy[long], dx[long])))
    if abs(angle) < math.radians(0.5):
        return points
    cy, cx = shape[0] / 2, shape[1] / 2
    cos, sin = math.cos(angle), math.sin(angle)
    x, y = points[..., 0] - cx, points[..., 1] - cy
    return np.stack((cx + x * cos + y * sin, cy - x * sin + y * cos), axis=-1)


def layout(texts: list[str], boxes: Any) -> str:
    """Lines in reading order as text. Lines are grouped into paragraphs where the gap above a
    line is over half the usual line's height; a short line clearly taller than the usual line
    is a heading (so it starts a chunk, as in a born-digital file); three or more lines of
    short cells on the same columns are a table, written as rows that name their columns."""
    order = sorted(
        range(len(texts)), key=lambda i: (float(boxes[i][:, 1].min()), float(boxes[i][:, 0].min()))
    )
    texts = [texts[i] for i in order]
    boxes = [boxes[i] for i in order]
    spans = [(float(min(p[1] for p in b)), float(max(p[1] for p in b))) for b in boxes]
    sizes = [_glyph_size(box, text) for box, text in zip(boxes, texts, strict=True)]
    # The usual line: the height and glyph size of the lines long enough to be body text.
    body = [i for i, t in enumerate(texts) if len(t) >= 10] or list(range(len(texts)))
    usual = statistics.median(spans[i][1] - spans[i][0] for i in body)
    usual_size = statistics.median(sizes[i] for i in body)
    out: list[str] = []
    previous_bottom: float | None = None
    was_heading = False
    rows = _rows(boxes, spans, usual)
    grids = _grids(
        [[texts[i] for i in row] for row in rows], [[boxes[i] for i in row] for row in rows], usual
    )
    for number, row in enumerate(rows):
        top, bottom = min(spans[i][0] for i in row), max(spans[i][1] for i in row)
        if number in grids:
            block = grids[number]
            if block is None:
                continue  # (a later row of a table already written)
            out.append("\n\n" if out else "")
            out.append("\n\n".join(row_lines(block)))
            previous_bottom, was_heading = None, True  # (what follows starts a paragraph)
            continue
        line = ""
        for i in row:  # (cells of one visual line, left to right)
            part = texts[i].strip()
            line = f"{line}{glue(line, part)}{part}" if line else part
        size = max(sizes[i] for i in row)
        heading = size > 1.25 * usual_size and len(line) <= 40
        if out:
            gap = previous_bottom is None or top - previous_bottom > 0.5 * usual
            if gap or heading or was_heading:
                out.append("\n\n")
            else:
                out.append(glue(out[-1], line))  # a line wrapped mid-sentence
        out.append(f"## {line}" if heading else line)
        previous_bottom, was_heading = bottom, heading
    return "".join(out).strip()
