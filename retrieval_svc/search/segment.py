"""Chinese word segmentation for the ``content_seg`` field (pure).

The index keeps two views of a chunk's text: ``content``, analysed into overlapping bigrams
(works for any language, no dictionary), and ``content_seg``, the text cut into dictionary
words by jieba (``rjieba``, dictionary built in) and joined with spaces, which the
``whitespace`` analyzer indexes as is. Queries are cut the same way. Punctuation is dropped
and Latin text lowercased, so both sides agree token for token.

``rjieba`` is imported on first use: importing it builds its dictionary (about 0.4 s on a
quiet machine, seconds on a busy one), which a process that cuts no text never needs — a
watcher whose parser workers read the documents narrows what changed without it. The
service loads it at its start (``preload``), so no query waits for it.
"""

from __future__ import annotations

import functools
from types import ModuleType


@functools.cache
def _jieba() -> ModuleType:
    import rjieba

    return rjieba


def preload() -> None:
    """Load the dictionary now (a service's start), not at the first text cut."""
    _jieba()


def segment(text: str) -> str:
    """``text`` as space-separated words."""
    return " ".join(w.lower() for w in _jieba().cut(text) if any(c.isalnum() for c in w))
