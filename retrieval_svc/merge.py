"""Merging knowledge-base and web chunks into one numbered G-Cite context (design.md §9).

Behaviour is that of the customer's code node (seed appendix A): RAG items normalised from
Dify's nested form, web items from any provider's form, the subtitle fallback chain, RAG
before web, score-descending within a source (ties keep input order), numbering from 1, and
``formatted_chunks`` as ``[C:{id}]\\n{content}`` blocks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from retrieval_svc.chunks import (
    UnifiedChunk,
    number_chunks,
    rag_chunk,
    site_host,
    web_chunk_of,
    web_subtitle,
)
from retrieval_svc.chunks import text as _text

__all__ = [
    "ShapeError",
    "extract_web_items",
    "format_chunks",
    "merge",
    "merge_within_top_k",
    "number_chunks",
    "numbered_output",
    "ordered",
    "rag_from_dify",
    "rag_items",
    "site_host",
    "web_chunk",
    "web_chunks",
    "web_subtitle",
]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float:
    """A number from a node's output; 0 for what is none (text, ``inf``, ``nan``, 10**400)."""
    if isinstance(value, bool):
        return 0.0
    try:
        number = float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _position(value: Any) -> int:
    """A segment position (an index's ``integer``); 0 for what is none or out of range."""
    number = _number(value)
    return int(number) if 0 <= number <= 2**31 - 1 else 0


MAX_MERGE_ITEMS = 1000  # results per source in one merge (Dify's top_k and a web node's, far less)


def _bounded(items: list[Any], path: str) -> None:
    """Refuse a list past ``MAX_MERGE_ITEMS`` before its items are looked at: one request of
    60,000 tiny results once held the event loop for 4 s."""
    if len(items) > MAX_MERGE_ITEMS:
        raise ShapeError(f"more than {MAX_MERGE_ITEMS:,} results ({len(items):,})", path)


def rag_items(raw: Any, path: str = "rag_chunks") -> list[Mapping[str, Any]]:
    """Dify knowledge-retrieval results: the node's ``result`` list (or ``{"result": [...]}``);
    ShapeError for anything else."""
    if isinstance(raw, Mapping) and "result" in raw:
        return rag_items(raw["result"], f"{path}.result")
    if raw is None or raw == "":
        return []
    if not isinstance(raw, list):
        raise ShapeError(
            f"expected the knowledge-retrieval node's result list, got {type(raw).__name__}", path
        )
    _bounded(raw, path)
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ShapeError(f"a result is an object, got {type(item).__name__}", f"{path}[{i}]")
    return list(raw)


def rag_from_dify(items: Iterable[Any]) -> list[UnifiedChunk]:
    """Dify knowledge-retrieval results (``content`` + nested ``metadata``) as chunks;
    anything that is not an object is passed over (``rag_items`` refuses it first)."""
    out: list[UnifiedChunk] = []
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        content = _text(item.get("content"))
        if not content:
            continue
        meta = _mapping(item.get("metadata"))
        doc = _mapping(meta.get("doc_metadata"))
        out.append(
            rag_chunk(
                content=content,
                document_title=_text(doc.get("document_title")),
                document_name=_text(doc.get("document_name")) or _text(meta.get("document_name")),
                dataset_name=_text(meta.get("dataset_name")),
                url=_text(doc.get("source_file_url")),
                score=_number(meta.get("score")),
                segment_position=_position(meta.get("segment_position")),
            )
        )
    return out


class ShapeError(ValueError):
    """An input is in none of the shapes Dify's nodes emit; ``path`` says where."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


_WRAPPER_KEYS = ("json", "results", "references", "webPages", "data")
_ITEM_KEYS = ("content", "snippet", "summary", "url", "title", "name")


def _is_wrapper(value: Mapping[str, Any]) -> bool:
    return any(k in value for k in _WRAPPER_KEYS) and not any(k in value for k in _ITEM_KEYS)


def _item_list(raw: Any, path: str) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ShapeError(f"expected a list of web results, got {type(raw).__name__}", path)
    _bounded(raw, path)
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ShapeError(
                f"a web result is an object, got {type(item).__name__}", f"{path}[{i}]"
            )
    return list(raw)


def extract_web_items(raw: Any, path: str = "web_chunks") -> list[Mapping[str, Any]]:
    """Web items from every shape Dify's search nodes and tools emit; ShapeError otherwise.

    A plain list of items (any provider's item form); Tavily's ``{"results": [...]}``; Bocha's
    ``{"data": {"webPages": {"value": [...]}}}`` (or without ``data``); Baidu's
    ``{"references": [...]}``; a tool node's ``{"json": [...]}`` envelope; and lists of those
    wrappers, such as Baidu's node output ``[{"references": [...]}]``.
    """
    if raw is None or (isinstance(raw, list | dict | str) and not raw):
        return []
    if isinstance(raw, Mapping):
        if "json" in raw:
            return extract_web_items(raw["json"], f"{path}.json")
        if "results" in raw:
            return _item_list(raw["results"], f"{path}.results")
        if "references" in raw:
            return _item_list(raw["references"], f"{path}.references")
        data = raw.get("data")
        where, holder = (f"{path}.data", data) if isinstance(data, Mapping) else (path, raw)
        pages = holder.get("webPages")
        if isinstance(pages, Mapping):
            return _item_list(pages.get("value"), f"{where}.webPages.value")
        raise ShapeError(
            "not a web search output: expected a list of results, or an object with "
            "results (Tavily), data.webPages.value (Bocha), references (Baidu) or json "
            "(a tool's envelope)",
            path,
        )
    if isinstance(raw, list):
        _bounded(raw, path)
        if all(isinstance(x, Mapping) and _is_wrapper(x) for x in raw):
            items = [
                item for i, x in enumerate(raw) for item in extract_web_items(x, f"{path}[{i}]")
            ]
            _bounded(items, path)
            return items
        return _item_list(raw, path)
    raise ShapeError(f"expected a list or an object, got {type(raw).__name__}", path)


def web_chunk(item: Mapping[str, Any]) -> UnifiedChunk | None:
    """One web item (standard form or a provider's own) as a chunk; None when it has no text."""
    # The standard form and the seed's keys first; Bocha's raw names (name, summary,
    # siteName, datePublished / dateLastCrawled) where a Bocha node's items arrive unmapped.
    content = _text(item.get("content")) or _text(item.get("summary")) or _text(item.get("snippet"))
    if not content:
        return None
    return web_chunk_of(
        content=content,
        title=_text(item.get("title")) or _text(item.get("name")),
        url=_text(item.get("url")),
        score=_number(item.get("authority_score") or item.get("score")),
        site_name=(
            _text(item.get("website"))
            or _text(item.get("site_name"))
            or _text(item.get("siteName"))
        ),
        date=(
            _text(item.get("date"))
            or _text(item.get("published_date"))
            or _text(item.get("datePublished"))
            or _text(item.get("dateLastCrawled"))
        ),
    )


def merge(
    rag: Iterable[UnifiedChunk], web_items: Iterable[Mapping[str, Any]], max_web_results: int
) -> list[UnifiedChunk]:
    """RAG chunks and the first ``max_web_results`` web items, sorted and numbered."""
    return number_chunks(ordered([*rag, *web_chunks(web_items, max_web_results)]))


def merge_within_top_k(
    rag: list[UnifiedChunk],
    web: list[UnifiedChunk],
    *,
    top_k: int,
    score_threshold: float,
) -> list[UnifiedChunk]:
    """At most ``top_k`` chunks, knowledge base first, web after, numbered (Dify's records).

    Web chunks must meet the threshold like any record (a provider without scores, such as
    Bocha, scores 0), and get at most half the slots when the knowledge base can fill the
    rest, so neither source crowds the other out.
    """
    web = [
        c.model_copy(update={"score": min(max(c.score, 0.0), 1.0)})
        for c in web
        if min(max(c.score, 0.0), 1.0) >= score_threshold
    ]
    reserve = min(len(web), max(1, top_k // 2)) if web else 0
    rag_kept = rag[: top_k - reserve]
    return number_chunks(ordered([*rag_kept, *web[: top_k - len(rag_kept)]]))


def web_chunks(items: Iterable[Mapping[str, Any]], max_results: int) -> list[UnifiedChunk]:
    """The first ``max_results`` items as chunks, empty ones dropped afterwards (as the seed)."""
    return [c for c in (web_chunk(i) for i in list(items)[: max(max_results, 0)]) if c]


def ordered(chunks: Iterable[UnifiedChunk]) -> list[UnifiedChunk]:
    """RAG before web; by score, descending, within each; ties keep their order."""
    kept = [c for c in chunks if c.content.strip()]
    return sorted(kept, key=lambda c: (0 if c.source_type == "rag" else 1, -c.score))


def format_chunks(chunks: Iterable[UnifiedChunk]) -> str:
    """``[C:{id}]\\n{content}`` blocks separated by a blank line."""
    return "".join(f"[C:{c.id}]\n{c.content}\n\n" for c in chunks).strip()


def chunk_dict(chunk: UnifiedChunk) -> dict[str, Any]:
    """A chunk as the code node emits it: extras only when they carry something.

    The fields are read from the model's ``__dict__`` as they are (a chunk's are plain JSON
    values): ``model_dump`` copies every nested value again, and iterating the model runs a
    generator that filters out private names, on each field of each of a request's chunks."""
    out = {name: value for name, value in chunk.__dict__.items() if value is not None}
    if out.get("metadata"):
        out["metadata"] = dict(out["metadata"])
    else:
        out.pop("metadata", None)
    return out


def numbered_output(chunks: list[UnifiedChunk]) -> dict[str, Any]:
    """The code node's output for numbered chunks: ``formatted_chunks``, ``chunk_count``,
    ``chunk_metadata``."""
    return {
        "formatted_chunks": format_chunks(chunks),
        "chunk_count": len(chunks),
        "chunk_metadata": [chunk_dict(c) for c in chunks],
    }
