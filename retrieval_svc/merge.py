"""Merging knowledge-base and web chunks into one numbered G-Cite context (DESIGN §9).

Behaviour is that of the customer's code node (seed appendix A): RAG items normalised from
Dify's nested form, web items from any provider's form, the subtitle fallback chain, RAG
before web, score-descending within a source (ties keep input order), numbering from 1, and
``formatted_chunks`` as ``[C:{id}]\\n{content}`` blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

from retrieval_svc.chunks import UnifiedChunk, number_chunks

__all__ = [
    "extract_web_items",
    "format_chunks",
    "merge",
    "number_chunks",
    "numbered_output",
    "ordered",
    "rag_from_dify",
    "site_host",
    "web_chunk",
    "web_chunks",
    "web_subtitle",
]


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return 0.0
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def site_host(url: str) -> str:
    """The URL's host without a leading ``www.`` (empty when there is none)."""
    if not url:
        return ""
    try:
        host = urlparse(url).netloc
    except ValueError:
        return ""
    return host[4:] if host.startswith("www.") else host


def web_subtitle(site_name: str, host: str, date: str) -> str:
    """``site · date`` → ``site`` → ``date`` → ``""``; site is the site name, else the host."""
    site = site_name.strip() or host
    date = date.strip()
    if site and date:
        return f"{site} · {date}"
    return site or date


def rag_from_dify(items: Iterable[Any]) -> list[UnifiedChunk]:
    """Dify knowledge-retrieval results (``content`` + nested ``metadata``) as chunks."""
    out: list[UnifiedChunk] = []
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        content = _text(item.get("content"))
        if not content:
            continue
        meta = _mapping(item.get("metadata"))
        doc = _mapping(meta.get("doc_metadata"))
        name = _text(doc.get("document_name")) or _text(meta.get("document_name"))
        dataset = _text(meta.get("dataset_name"))
        url = _text(doc.get("source_file_url"))
        out.append(
            UnifiedChunk(
                content=content,
                source_type="rag",
                document_title=_text(doc.get("document_title")) or name,
                url=url,
                score=_number(meta.get("score")),
                display_subtitle=dataset,
                document_name=name,
                dataset_name=dataset,
                source_file_url=url,
                segment_position=int(_number(meta.get("segment_position"))),
            )
        )
    return out


def extract_web_items(raw: Any) -> list[Mapping[str, Any]]:
    """Web items from the shapes Dify's search nodes emit.

    ``[{"references": [...]}]`` (Baidu's node), ``{"json": [{"references": [...]}]}`` (a
    tool envelope), or a plain list of items.
    """
    if not raw:
        return []
    if isinstance(raw, list) and raw and isinstance(raw[0], Mapping) and "references" in raw[0]:
        refs = raw[0].get("references")
        if isinstance(refs, list):
            return [r for r in refs if isinstance(r, Mapping)]
    if isinstance(raw, Mapping):
        envelope = raw.get("json")
        if isinstance(envelope, list) and envelope and isinstance(envelope[0], Mapping):
            refs = envelope[0].get("references")
            if isinstance(refs, list):
                return [r for r in refs if isinstance(r, Mapping)]
        return []
    if isinstance(raw, list):
        return [r for r in raw if isinstance(r, Mapping)]
    return []


def web_chunk(item: Mapping[str, Any]) -> UnifiedChunk | None:
    """One web item (standard form or a provider's own) as a chunk; None when it has no text."""
    content = _text(item.get("content")) or _text(item.get("snippet"))
    if not content:
        return None
    url = _text(item.get("url"))
    host = site_host(url)
    site = _text(item.get("website")) or _text(item.get("site_name"))
    date = (_text(item.get("date")) or _text(item.get("published_date")))[:10]
    return UnifiedChunk(
        content=content,
        source_type="web",
        document_title=_text(item.get("title")),
        url=url,
        score=_number(item.get("authority_score") or item.get("score")),
        display_subtitle=web_subtitle(site, host, date),
        document_name=url,
        site_name=site,
        site_host=host,
        source_file_url=url,
        published_date=date,
    )


def merge(
    rag: Iterable[UnifiedChunk], web_items: Iterable[Mapping[str, Any]], max_web_results: int
) -> list[UnifiedChunk]:
    """RAG chunks and the first ``max_web_results`` web items, sorted and numbered."""
    return number_chunks(ordered([*rag, *web_chunks(web_items, max_web_results)]))


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
    """A chunk as the code node emits it: extras only when they carry something."""
    out = chunk.model_dump(exclude_none=True)
    if not out.get("metadata"):
        out.pop("metadata", None)
    return out


def numbered_output(chunks: list[UnifiedChunk]) -> dict[str, Any]:
    """The code node's output: ``formatted_chunks``, ``chunk_count``, ``chunk_metadata``,
    for chunks in their final order (numbered here, 1 to n)."""
    numbered = number_chunks(chunks)
    return {
        "formatted_chunks": format_chunks(numbered),
        "chunk_count": len(numbered),
        "chunk_metadata": [chunk_dict(c) for c in numbered],
    }
