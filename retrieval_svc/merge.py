"""Numbering chunks and formatting the G-Cite context (DESIGN §9 rule 4)."""

from __future__ import annotations

from typing import Any

from retrieval_svc.chunks import UnifiedChunk, number_chunks

__all__ = ["format_chunks", "number_chunks", "numbered_output"]


def format_chunks(chunks: list[UnifiedChunk]) -> str:
    """``[C:{id}]\\n{content}`` blocks separated by a blank line."""
    return "".join(f"[C:{c.id}]\n{c.content}\n\n" for c in chunks).strip()


def numbered_output(chunks: list[UnifiedChunk]) -> dict[str, Any]:
    """The seed code node's output: ``formatted_chunks``, ``chunk_count``, ``chunk_metadata``."""
    numbered = number_chunks(chunks)
    return {
        "formatted_chunks": format_chunks(numbered),
        "chunk_count": len(numbered),
        "chunk_metadata": [c.model_dump() for c in numbered],
    }
