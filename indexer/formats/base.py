"""What a reader returns, and what it is given (its budget, the OCR mode, a way to ask for
more time)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from indexer.budget import Budget

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def glue(left: str, right: str) -> str:
    """What joins two pieces of one line or sentence: nothing between Chinese characters (a
    wrapped line, a split word box), a space otherwise."""
    return "" if _CJK.match(left[-1:]) and _CJK.match(right[:1]) else " "


OcrMode = Literal["auto", "off", "force"]
OCR_MODES: tuple[OcrMode, ...] = ("auto", "off", "force")


@dataclass(frozen=True, slots=True)
class Part:
    """A stretch of a document's text and what is true of all of it, stored on each of its
    chunks' ``metadata`` (``{"ocr": True, "ocr_confidence": 0.97, "page": 3}``). Parts with
    the same marks are chunked together; a change of marks starts a new chunk."""

    text: str
    marks: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Parsed:
    """A document's text, in parts, with what it says of itself.

    ``front_matter`` is metadata the document carries (Markdown front matter); ``title`` its
    own title (PDF or Office properties, a deck's first slide) when it has one; ``info`` what
    the reader learned of it, stored on every chunk's ``metadata`` (``format``, ``pages``,
    ``ocr_pages``) unless the document's metadata sets the same key.
    """

    parts: tuple[Part, ...]
    front_matter: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The whole text (parts separated by blank lines)."""
        return "\n\n".join(p.text for p in self.parts if p.text)

    @classmethod
    def of(cls, text: str, **kwargs: Any) -> Parsed:
        """A document of one part."""
        return cls((Part(text),), **kwargs)


def _no_grant(seconds: float) -> None:  # noqa: ARG001
    return None


@dataclass(frozen=True, slots=True)
class Reading:
    """What a reader is given beside the bytes.

    ``grant(seconds)`` asks for more time before the document's deadline: a reader calls it
    before each page it reads by OCR (``Budget.ocr_page_seconds``), so a long scan is not
    stopped by a deadline sized for text, and a stuck page still is.
    """

    budget: Budget = field(default_factory=Budget)
    ocr: OcrMode = "auto"
    grant: Callable[[float], None] = _no_grant
