"""Turning file bytes into text with headings marked ``#`` (so the chunker sees structure).

| suffix | library | headings from |
|---|---|---|
| .md .markdown | — | Markdown itself; YAML front matter is split off |
| .txt | — | none (paragraphs by blank lines); UTF-8, else GB18030 |
| .html .htm | BeautifulSoup | ``<h1>`` to ``<h6>``; scripts, styles and navigation dropped |
| .pdf | pypdf | none (page text); encrypted or corrupt files are errors |
| .docx | python-docx | paragraph styles ``Heading N`` and ``Title``; tables as rows |
"""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from indexer.budget import Budget
from indexer.documents import DocumentError, split_front_matter

# pypdf and the HTML parser log noisy warnings about malformed but readable input.
logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class Parsed:
    """Text of a document and the metadata it carries itself (front matter)."""

    text: str
    front_matter: dict[str, Any] = field(default_factory=dict)


def decode_text(data: bytes) -> str:
    """UTF-8 (BOM tolerated), else GB18030 — what Chinese text files are in practice."""
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise DocumentError("text is neither UTF-8 nor GB18030")


def parse_markdown(data: bytes, budget: Budget) -> Parsed:  # noqa: ARG001
    front, body = split_front_matter(decode_text(data))
    return Parsed(body, front)


def parse_text(data: bytes, budget: Budget) -> Parsed:  # noqa: ARG001
    return Parsed(decode_text(data))


def parse_html(data: bytes, budget: Budget) -> Parsed:  # noqa: ARG001
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "nav", "header", "footer", "noscript", "template"]):
        tag.decompose()
    lines: list[str] = []
    blocks = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "tr", "dt", "dd"]
    for element in soup.find_all(blocks):
        if element.find_parent(blocks):
            continue  # its text is part of an enclosing block
        text = " ".join(element.get_text(" ", strip=True).split())
        if not text:
            continue
        name = element.name or ""
        lines.append(f"{'#' * int(name[1])} {text}" if name in blocks[:6] else text)
    if not lines:  # no block structure at all: take the body text
        body = soup.body or soup
        lines = [line.strip() for line in body.get_text("\n").splitlines() if line.strip()]
    return Parsed("\n\n".join(lines))


def parse_pdf(data: bytes, budget: Budget) -> Parsed:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError("PDF is encrypted")
        budget.check_pages(len(reader.pages))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except DocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise DocumentError(f"PDF cannot be read: {type(exc).__name__}: {exc}") from exc
    return Parsed("\n\n".join(p for p in pages if p))


def unpacked_size(data: bytes, budget: Budget, what: str) -> None:
    """Refuse a zip container (an Office file) whose members unpack past the budget, from its
    directory, before any member is opened; a member that lies about its size is caught by
    ``zipfile`` when read (it checks the CRC and stops at the declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentError(f"{what} cannot be read: {type(exc).__name__}") from exc
    budget.check_unpacked(total)


def parse_docx(data: bytes, budget: Budget) -> Parsed:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    unpacked_size(data, budget, "DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, ValueError, KeyError, OSError) as exc:
        raise DocumentError(f"DOCX cannot be read: {type(exc).__name__}") from exc
    except Exception as exc:  # zipfile.BadZipFile and friends from a damaged package
        raise DocumentError(f"DOCX cannot be read: {type(exc).__name__}") from exc
    lines: list[str] = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        if style == "Title":
            lines.append(f"# {text}")
        elif style.startswith("Heading ") and style[8:].isdigit():
            lines.append(f"{'#' * min(int(style[8:]), 6)} {text}")
        else:
            lines.append(text)
    for table in document.tables:
        for row in table.rows:
            cells = [c.text.strip() for c in row.cells if c.text.strip()]
            if cells:
                lines.append(" | ".join(cells))
    return Parsed("\n\n".join(lines))


PARSERS: dict[str, Callable[[bytes, Budget], Parsed]] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_text,
    ".html": parse_html,
    ".htm": parse_html,
    ".pdf": parse_pdf,
    ".docx": parse_docx,
}


def preload() -> None:
    """Import every format's library now (a worker does, before it caps its memory, so no
    document's budget pays for an import)."""
    import bs4  # noqa: F401
    import docx  # noqa: F401
    import pypdf  # noqa: F401


def supported(name: str) -> bool:
    """Whether a file name has a suffix the indexer reads."""
    return PurePosixPath(name).suffix.lower() in PARSERS


def parse(name: str, data: bytes, budget: Budget | None = None) -> Parsed:
    """Parse a file by its suffix, within ``budget``; DocumentError when it cannot be read."""
    parser = PARSERS.get(PurePosixPath(name).suffix.lower())
    if parser is None:
        raise DocumentError(f"unsupported file type {PurePosixPath(name).suffix!r}")
    return parser(data, budget or Budget())
