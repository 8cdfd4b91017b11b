"""Heading- and paragraph-aware chunking for Chinese and English text (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# Sentence ends: Chinese full stops and marks, or ASCII ones followed by space.
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class ChunkOptions:
    """Chunk size and overlap, in characters."""

    max_chars: int = 600
    overlap_chars: int = 0

    def __post_init__(self) -> None:
        if self.max_chars < 50:
            raise ValueError("chunk size must be at least 50 characters")
        if not 0 <= self.overlap_chars < self.max_chars // 2:
            raise ValueError("overlap must be non-negative and under half the chunk size")


def leveled_blocks(text: str) -> list[tuple[int, str]]:
    """Paragraphs and headings in order, as ``(level, text)``: a heading's level (1 to 6), 0
    for a paragraph; blank lines separate paragraphs."""
    out: list[tuple[int, str]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            joined = "\n".join(para).strip()
            if joined:
                out.append((0, joined))
            para.clear()

    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            flush()
            if heading.group(2):
                out.append((len(heading.group(1)), heading.group(2)))
        elif not line.strip():
            flush()
        else:
            para.append(line.rstrip())
    flush()
    return out


def blocks(text: str) -> list[tuple[bool, str]]:
    """Paragraphs and headings in order, as ``(is_heading, text)``."""
    return [(level > 0, block) for level, block in leveled_blocks(text)]


def _split_long(text: str, limit: int) -> list[str]:
    """Split a paragraph longer than ``limit`` at sentence ends, hard-splitting if needed."""
    pieces: list[str] = []
    current = ""
    for sentence in (s for s in _SENTENCE_END.split(text) if s):
        if len(sentence) > limit:  # hard cuts at offsets: slicing the rest off each time was
            if current:  # quadratic (a 94 MB line without a full stop ran for minutes)
                pieces.append(current)
                current = ""
            whole = (len(sentence) - 1) // limit * limit
            pieces.extend(sentence[i : i + limit] for i in range(0, whole, limit))
            sentence = sentence[whole:]
        if len(current) + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current += sentence
    if current:
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def chunk_text(text: str, options: ChunkOptions | None = None) -> list[str]:
    """Chunks of at most ``max_chars`` (plus overlap); a heading starts a new chunk."""
    return [chunk for chunk, _ in chunk_sections(text, options)]


def chunk_sections(
    text: str, options: ChunkOptions | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """``chunk_text``'s chunks, each with its heading path: the headings it stands under
    (outermost first) where its text begins."""
    opts = options or ChunkOptions()
    chunks: list[str] = []
    paths: list[tuple[str, ...]] = []
    current: list[str] = []
    size = 0
    has_body = False  # headings alone never make a chunk: they lead the text below them
    trail: list[tuple[int, str]] = []  # the open headings, outermost first

    def emit() -> None:
        nonlocal size, has_body
        if current:  # (a heading after body text emits before it opens: the trail is this
            chunks.append("\n".join(current))  # chunk's own)
            paths.append(tuple(heading for _, heading in trail))
            current.clear()
            size = 0
            has_body = False

    for level, block in leveled_blocks(text):
        is_heading = level > 0
        if is_heading and has_body:
            emit()
        if is_heading:
            while trail and trail[-1][0] >= level:
                trail.pop()
            trail.append((level, block))
        has_body = has_body or not is_heading
        for piece in _split_long(block, opts.max_chars) if len(block) > opts.max_chars else [block]:
            if current and size + len(piece) + 1 > opts.max_chars:
                emit()
            current.append(piece)
            size += len(piece) + 1
    emit()
    if opts.overlap_chars and len(chunks) > 1:
        tail = opts.overlap_chars
        chunks = [chunks[0]] + [prev[-tail:] + "\n" + cur for prev, cur in pairwise(chunks)]
    return list(zip(chunks, paths, strict=True))
