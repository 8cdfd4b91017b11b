"""Markdown, plain text and HTML."""

from __future__ import annotations

from indexer.documents import DocumentError, split_front_matter
from indexer.formats.base import Parsed, Reading


def decode_text(data: bytes) -> str:
    """UTF-8 (BOM tolerated), else GB18030 — what Chinese text files are in practice."""
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise DocumentError("text is neither UTF-8 nor GB18030")


def parse_markdown(data: bytes, reading: Reading) -> Parsed:  # noqa: ARG001
    front, body = split_front_matter(decode_text(data))
    return Parsed.of(body, front_matter=front, info={"format": "markdown"})


def parse_text(data: bytes, reading: Reading) -> Parsed:  # noqa: ARG001
    return Parsed.of(decode_text(data), info={"format": "text"})


_BLOCKS = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "tr", "dt", "dd"]


def parse_html(data: bytes, reading: Reading) -> Parsed:  # noqa: ARG001
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "nav", "header", "footer", "noscript", "template"]):
        tag.decompose()
    lines: list[str] = []
    for element in soup.find_all(_BLOCKS):
        if element.find_parent(_BLOCKS):
            continue  # its text is part of an enclosing block
        text = " ".join(element.get_text(" ", strip=True).split())
        if not text:
            continue
        name = element.name or ""
        lines.append(f"{'#' * int(name[1])} {text}" if name in _BLOCKS[:6] else text)
    if not lines:  # no block structure at all: take the body text
        body = soup.body or soup
        lines = [line.strip() for line in body.get_text("\n").splitlines() if line.strip()]
    return Parsed.of("\n\n".join(lines), info={"format": "html"})
