"""Chinese word segmentation for the ``content_seg`` field (pure).

The index keeps two views of a chunk's text: ``content``, analysed into overlapping bigrams
(works for any language, no dictionary), and ``content_seg``, the text cut into dictionary
words by jieba (``rjieba``, dictionary built in) and joined with spaces, which the
``whitespace`` analyzer indexes as is. Queries are cut the same way. Punctuation is dropped
and Latin text lowercased, so both sides agree token for token.
"""

from __future__ import annotations

import rjieba


def segment(text: str) -> str:
    """``text`` as space-separated words."""
    return " ".join(w.lower() for w in rjieba.cut(text) if any(c.isalnum() for c in w))
