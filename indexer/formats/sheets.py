"""Spreadsheets: Excel (``.xlsx``, ``.xlsm``, ``.xls``), OpenDocument (``.ods``), WPS (``.et``)
and delimited text (``.csv``, ``.tsv``).

Each visible sheet is a section headed by its name; its first non-empty row names the
columns when it looks like a header (text, no bare numbers), and every row after it is one
paragraph naming its columns (``indexer.formats.tables``), so the chunker cuts between rows
and each chunk still says what its values mean. A formula is indexed by the value Excel last
saved for it (a file written by a program that never computed it has none: the cell is
empty); macros never run. Hidden sheets are left out (they hold lookups and scratch more
often than content meant for readers) and counted in ``metadata.hidden_sheets``.

``.xlsx``/``.xlsm`` are streamed by openpyxl's read-only mode, a row at a time, so a
100,000-row sheet never sits in memory whole; the text so far is held to ``--max-chars``.
``.xls`` (Excel 97-2003) and ``.ods`` are read by python-calamine; a WPS ``.et`` is one of the
two Excel formats inside, read as what it is. None of them goes through LibreOffice: it
evaluates volatile functions (``NOW()``, ``RAND()``, ``INFO()``, ``CELL()``) whenever it loads
a file, whatever its ``RecalcMode`` says, so a converted sheet would hold the worker's clock,
host and paths instead of what the author saved. A CSV is UTF-8 or GB18030, its
delimiter found by ``csv.Sniffer`` among ``, ; | tab`` (a ``.tsv`` is tab), its first row the
header.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from indexer.budget import Budget
from indexer.documents import DocumentError
from indexer.formats.base import Parsed, Reading
from indexer.formats.office import unpacked_size
from indexer.formats.tables import row_lines
from indexer.formats.text import decode_text


class _Text:
    """Paragraphs gathered under the ``--max-chars`` budget."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.lines: list[str] = []
        self.chars = 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.chars += len(line) + 2
        self.budget.check_chars(self.chars)

    def sheet(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        self.add(f"## {' '.join(name.split()) or 'Sheet'}")
        for line in row_lines(rows):
            self.add(line)

    def text(self) -> str:
        return "\n\n".join(self.lines)


def parse_xlsx(data: bytes, reading: Reading) -> Parsed:
    import openpyxl

    unpacked_size(data, reading, "XLSX")
    try:
        book = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_vba=False, keep_links=False
        )
    except Exception as exc:  # openpyxl raises what zipfile, lxml and its reader raise
        raise DocumentError(f"Excel file cannot be read: {type(exc).__name__}: {exc}") from exc
    try:
        sheets = book.worksheets
        reading.budget.check_pages(len(sheets), "the workbook has", "sheets")
        out = _Text(reading.budget)
        hidden = 0
        for sheet in sheets:
            if sheet.sheet_state != "visible":
                hidden += 1
                continue
            if hasattr(sheet, "iter_rows"):  # (a chart sheet has no cells)
                out.sheet(sheet.title, sheet.iter_rows(values_only=True))
    except DocumentError:
        raise
    except Exception as exc:  # a damaged sheet part, found while streaming it
        raise DocumentError(f"Excel file cannot be read: {type(exc).__name__}: {exc}") from exc
    finally:
        book.close()
    info = {"format": "xlsx", "pages": len(sheets), "hidden_sheets": hidden}
    return Parsed.of(out.text(), title=_title(book.properties.title), info=info)


def _title(value: Any) -> str | None:
    return str(value).strip() or None if value else None


def _calamine(data: bytes, reading: Reading, kind: str, what: str) -> Parsed:
    """A workbook python-calamine reads (``.xls``, ``.ods``), by the values saved in it."""
    import python_calamine as calamine

    try:
        book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
    except calamine.PasswordError as exc:
        raise DocumentError(
            f"the {kind} file is password-protected: remove the password to index it"
        ) from exc
    except Exception as exc:  # calamine's errors on damaged files are of several types
        raise DocumentError(f"{what} cannot be read: {type(exc).__name__}: {exc}") from exc
    sheets = book.sheets_metadata
    reading.budget.check_pages(len(sheets), "the workbook has", "sheets")
    out = _Text(reading.budget)
    hidden = 0
    try:
        for meta in sheets:
            if meta.visible != calamine.SheetVisibleEnum.Visible:
                hidden += 1
                continue
            if meta.typ != calamine.SheetTypeEnum.WorkSheet:
                continue
            out.sheet(meta.name, book.get_sheet_by_name(meta.name).iter_rows())
    except DocumentError:
        raise
    except Exception as exc:
        raise DocumentError(f"{what} cannot be read: {type(exc).__name__}: {exc}") from exc
    finally:
        book.close()
    info = {"format": kind[1:], "pages": len(sheets), "hidden_sheets": hidden}
    return Parsed.of(out.text(), info=info)


def parse_xls(data: bytes, reading: Reading) -> Parsed:
    return _calamine(data, reading, ".xls", "Excel file")


def parse_ods(data: bytes, reading: Reading) -> Parsed:
    unpacked_size(data, reading, "OpenDocument spreadsheet")
    return _calamine(data, reading, ".ods", "OpenDocument spreadsheet")


def parse_et(data: bytes, reading: Reading) -> Parsed:
    """A WPS Spreadsheets file: Excel 97-2003 or Office Open XML inside, read as that."""
    if data.startswith(b"PK\x03\x04"):
        parsed = parse_xlsx(data, reading)
    else:
        parsed = _calamine(data, reading, ".et", "WPS Spreadsheets file")
    return Parsed(parsed.parts, parsed.front_matter, parsed.title, {**parsed.info, "format": "et"})


def _delimiter(sample: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;|\t").delimiter
    except csv.Error:  # one column, or too irregular to tell: the format's own comma
        return ","


def parse_csv(data: bytes, reading: Reading, suffix: str = ".csv") -> Parsed:
    text = decode_text(data)
    delimiter = _delimiter(text[:65536], suffix)
    out = _Text(reading.budget)
    try:
        rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        for line in row_lines(rows, header=True):
            out.add(line)
    except csv.Error as exc:
        raise DocumentError(f"CSV cannot be read: {exc}") from exc
    return Parsed.of(out.text(), info={"format": suffix[1:]})


def parse_tsv(data: bytes, reading: Reading) -> Parsed:
    return parse_csv(data, reading, ".tsv")
