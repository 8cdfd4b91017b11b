"""Renumbering G-Cite markers in an answer (design.md §8, seed §1.3).

The LLM cites chunks by their merge number, ``[C:N]``, in any order and with repeats. For
display they are renumbered 1, 2, 3… in order of first appearance; a repeated chunk keeps its
number. Markers that name no retrieved chunk are removed from the answer and reported — never
given a citation of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# [C:3], [C: 3], 【C:3】, [C：3] — the forms LLMs actually produce.
MARKER = re.compile(r"[\[【]\s*C\s*[:：]\s*(\d{1,6})\s*[\]】]")


def resolve(answer: str, chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The renumbered answer, cited chunks in citation order, uncited and unknown ids."""
    by_id: dict[str, Mapping[str, Any]] = {}
    for chunk in chunks:
        chunk_id = str(chunk.get("id", "")).strip()
        if chunk_id and chunk_id not in by_id:
            by_id[chunk_id] = chunk
    numbers: dict[str, int] = {}
    unknown: dict[str, None] = {}  # ordered, and linear however many markers an answer has

    def renumber(match: re.Match[str]) -> str:
        original = str(int(match.group(1)))
        if original not in by_id:
            unknown.setdefault(original, None)
            return ""
        if original not in numbers:
            numbers[original] = len(numbers) + 1
        return f"[C:{numbers[original]}]"

    text = MARKER.sub(renumber, answer)
    citations = [
        {"number": number, "id": original, "chunk": dict(by_id[original])}
        for original, number in numbers.items()
    ]
    return {
        "answer": text,
        "citations": citations,
        "uncited_ids": [i for i in by_id if i not in numbers],
        "unknown_ids": list(unknown),
    }
