"""File bytes to text with headings marked ``#``, by suffix (docs/indexer.md, "Formats").

| suffix | reader | library |
|---|---|---|
| .md .markdown | ``formats.text`` | — (YAML front matter split off) |
| .txt | ``formats.text`` | — (UTF-8, else GB18030) |
| .html .htm | ``formats.text`` | BeautifulSoup |
| .pdf | ``formats.pdf`` | pdfplumber, pypdfium2; RapidOCR for pages without text |
| .docx | ``formats.office`` | python-docx |
| .pptx | ``formats.office`` | python-pptx |
| .xlsx .xlsm | ``formats.sheets`` | openpyxl (streamed) |
| .xls .ods | ``formats.sheets`` | python-calamine |
| .et | ``formats.sheets`` | python-calamine or openpyxl (what is inside) |
| .csv .tsv | ``formats.sheets`` | ``csv`` |
| .png .jpg .jpeg .tif .tiff .bmp .webp | ``formats.ocr`` | Pillow, RapidOCR |
| .doc .wps .rtf .odt | ``formats.convert``, ``formats.office`` | LibreOffice, python-docx |
| .ppt .dps .odp | ``formats.convert``, ``formats.office`` | LibreOffice, python-pptx |
| .eml .msg | ``formats.mail`` (attachments by their own readers) | ``email``, extract-msg |
| .epub | ``formats.mail`` | ``zipfile``, BeautifulSoup |

Every file's first bytes are checked against its suffix first (``formats.sniff``); an Office
97-2003 file named like an Office Open XML one (``报告.docx`` that is really a ``.doc``) is
read as what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from indexer.budget import Budget
from indexer.documents import DocumentError
from indexer.formats import convert, sniff
from indexer.formats.base import OcrMode, Parsed, Part, Reading
from indexer.formats.mail import parse_eml, parse_epub, parse_msg
from indexer.formats.ocr import parse_image
from indexer.formats.office import parse_docx, parse_pptx, unpacked_size
from indexer.formats.pdf import parse_pdf
from indexer.formats.sheets import (
    parse_csv,
    parse_et,
    parse_ods,
    parse_tsv,
    parse_xls,
    parse_xlsx,
)
from indexer.formats.text import decode_text, parse_html, parse_markdown, parse_text

__all__ = ["PARSERS", "OcrMode", "Parsed", "Part", "Reading", "decode_text", "parse", "supported"]

Reader = Callable[[bytes, Reading], Parsed]

PARSERS: dict[str, Reader] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_text,
    ".html": parse_html,
    ".htm": parse_html,
    ".pdf": parse_pdf,
    ".docx": parse_docx,
    ".pptx": parse_pptx,
    ".xlsx": parse_xlsx,
    ".xlsm": parse_xlsx,
    ".xls": parse_xls,
    ".ods": parse_ods,  # (spreadsheets never go through LibreOffice: it would recalculate)
    ".et": parse_et,
    ".csv": parse_csv,
    ".tsv": parse_tsv,
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"), parse_image),
}
_TABULAR = {"xlsx", "xls", "csv", "tsv", "et", "ods"}  # the first heading: a sheet's name
_MODERN = {"docx": parse_docx, "pptx": parse_pptx}


def _converted(suffix: str) -> Reader:
    """A reader that has LibreOffice convert a ``suffix`` file, then reads the result."""
    target = convert.TARGETS[suffix]

    def read(data: bytes, reading: Reading) -> Parsed:
        if data.startswith(b"PK\x03\x04"):  # (an archive: its limits before LibreOffice's)
            unpacked_size(data, reading, convert.NAMES.get(suffix, suffix))
        modern = convert.convert(data, suffix, target, reading.budget.seconds)
        parsed = _MODERN[target](modern, reading)
        info = {**parsed.info, "format": suffix[1:], "converted_by": "LibreOffice"}
        return Parsed(parsed.parts, parsed.front_matter, parsed.title, info)

    return read


PARSERS.update({suffix: _converted(suffix) for suffix in convert.TARGETS})
_MAIL = {".eml": parse_eml, ".msg": parse_msg}


def _mail(suffix: str, depth: int = 0) -> Reader:
    """A mail reader whose attachments are read by their own readers (a mail in a mail one
    level down)."""

    def read(data: bytes, reading: Reading) -> Parsed:
        def inner(name: str, blob: bytes, at: Reading) -> Parsed | None:
            kind = PurePosixPath(name).suffix.lower()
            if kind in _MAIL:
                return _mail(kind, depth + 1)(blob, at)
            return parse(name, blob, at) if supported(name) else None

        return _MAIL[suffix](data, reading, inner, depth)

    return read


PARSERS.update({suffix: _mail(suffix) for suffix in _MAIL})
PARSERS[".epub"] = parse_epub


def preload(ocr: bool = True) -> None:
    """Import every format's library now, and the OCR engine unless ``ocr`` is false (a
    worker does, before it caps its memory, so no document's budget pays for a load)."""
    import bs4  # noqa: F401
    import docx  # noqa: F401
    import openpyxl  # noqa: F401
    import pdfplumber  # noqa: F401
    import PIL.Image  # noqa: F401
    import pptx  # noqa: F401
    import pypdfium2  # noqa: F401
    import python_calamine  # noqa: F401

    if ocr:
        from indexer.formats.ocr import preload as load_ocr

        load_ocr()


def supported(name: str) -> bool:
    """Whether a file name has a suffix the indexer reads."""
    return PurePosixPath(name).suffix.lower() in PARSERS


def parse(name: str, data: bytes, reading: Reading | Budget | None = None) -> Parsed:
    """Parse a file by its suffix; DocumentError when it cannot be read."""
    if not isinstance(reading, Reading):
        reading = Reading(budget=reading or Budget())
    suffix = PurePosixPath(name).suffix.lower()
    parser = PARSERS.get(suffix)
    if parser is None:
        raise DocumentError(f"unsupported file type {suffix!r}")
    if suffix in sniff.OOXML and sniff.legacy_office(data):  # an old file with a new name
        suffix = {".docx": ".doc", ".pptx": ".ppt", ".xlsx": ".xls", ".xlsm": ".xls"}[suffix]
        parser = PARSERS.get(suffix, parser)
    sniff.check(suffix, data)
    parsed = parser(data, reading)
    if parsed.title is None and parsed.info.get("format") in _TABULAR:
        parsed = Parsed(parsed.parts, parsed.front_matter, PurePosixPath(name).stem, parsed.info)
    return parsed
