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
| .xls | ``formats.sheets`` | python-calamine |
| .csv .tsv | ``formats.sheets`` | ``csv`` |
| .png .jpg .jpeg .tif .tiff .bmp .webp | ``formats.ocr`` | Pillow, RapidOCR |
| .doc .ppt | ``formats.office`` | — (failed: save as .docx / .pptx) |

Every file's first bytes are checked against its suffix first (``formats.sniff``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from indexer.budget import Budget
from indexer.documents import DocumentError
from indexer.formats import sniff
from indexer.formats.base import OcrMode, Parsed, Part, Reading
from indexer.formats.ocr import parse_image
from indexer.formats.office import parse_docx, parse_pptx, refuse_legacy
from indexer.formats.pdf import parse_pdf
from indexer.formats.sheets import parse_csv, parse_tsv, parse_xls, parse_xlsx
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
    ".csv": parse_csv,
    ".tsv": parse_tsv,
    ".doc": refuse_legacy(".doc"),
    ".ppt": refuse_legacy(".ppt"),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"), parse_image),
}
_TABULAR = {"xlsx", "xls", "csv", "tsv"}  # their first heading is a sheet's name, not a title


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
    sniff.check(suffix, data)
    parsed = parser(data, reading)
    if parsed.title is None and parsed.info.get("format") in _TABULAR:
        parsed = Parsed(parsed.parts, parsed.front_matter, PurePosixPath(name).stem, parsed.info)
    return parsed
