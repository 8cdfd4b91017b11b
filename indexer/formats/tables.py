"""Tables as text a row at a time, each row naming its columns (issue #34 §3).

A row becomes one paragraph, ``型号: SCB13-800 · 额定容量: 800 kVA · 巡检周期: 每两周``, so a
chunk cut anywhere in a table still says what each value means, and BM25 and the embedder
see the column names beside the values. A table whose first row is not a header (a number
in it, or empty cells only) keeps its rows as values joined by `` · ``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime, time
from typing import Any

SEPARATOR = " · "


def cell_text(value: Any) -> str:
    """A cell's value as text: whole floats without ``.0``, dates as ISO dates, one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ""
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(" ")
    if isinstance(value, date | time):
        return value.isoformat()
    return " ".join(str(value).split())


def is_header(cells: Sequence[str]) -> bool:
    """Whether a first row names columns: some text, and no cell that is only a number."""
    filled = [c for c in cells if c]
    if not filled:
        return False
    for cell in filled:
        try:
            float(cell.replace(",", ""))
        except ValueError:
            continue
        return False
    return True


def row_lines(rows: Iterable[Sequence[Any]], header: bool | None = None) -> Iterator[str]:
    """Each non-empty row as one line naming its columns (see the module). ``header`` None:
    decided from the first non-empty row."""
    names: list[str] | None = None
    first = True
    rows_out = 0
    for raw in rows:
        cells = [cell_text(v) for v in raw]
        if not any(cells):
            continue
        if first:
            first = False
            if header if header is not None else is_header(cells):
                names = [c or f"#{i + 1}" for i, c in enumerate(cells)]
                continue
        rows_out += 1
        if names is None:
            yield SEPARATOR.join(c for c in cells if c)
            continue
        pairs = []
        for i, cell in enumerate(cells):
            if cell:
                name = names[i] if i < len(names) else f"#{i + 1}"
                pairs.append(f"{name}: {cell}")
        yield SEPARATOR.join(pairs)
    if names is not None and not rows_out:  # a header and nothing under it: keep its words
        yield SEPARATOR.join(n for n in names if not n.startswith("#"))
