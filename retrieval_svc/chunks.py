"""UnifiedChunk: the one chunk shape for knowledge-base and web results (design.md §9)."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field

SourceType = Literal["rag", "web"]


class UnifiedChunk(BaseModel):
    """One numbered chunk of the merged context; ``id`` is assigned when numbering."""

    id: str = Field("", description="The number N of its [C:N] marker.")
    content: str
    source_type: SourceType
    document_title: str = ""
    url: str = ""
    score: float = 0.0
    display_subtitle: str = ""
    document_name: str = ""
    dataset_name: str = ""
    site_name: str = ""
    site_host: str = ""
    source_file_url: str = ""
    segment_position: int = 0
    published_date: str = ""
    chunk_id: str | None = None
    document_id: str | None = None
    knowledge_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def text(value: object) -> str:
    """A stored or received value as text: stripped if a string, else empty."""
    return value.strip() if isinstance(value, str) else ""


def rag_chunk(
    *,
    content: str,
    document_title: str,
    document_name: str,
    dataset_name: str,
    url: str,
    score: float,
    segment_position: int = 0,
    chunk_id: str | None = None,
    document_id: str | None = None,
    knowledge_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> UnifiedChunk:
    """A knowledge-base chunk (design.md §9 rule 1): the title falls back to the document
    name, the subtitle is the dataset's name, the URL is the source file's."""
    return UnifiedChunk(
        content=content,
        source_type="rag",
        document_title=document_title or document_name,
        url=url,
        score=score,
        display_subtitle=dataset_name,
        document_name=document_name,
        dataset_name=dataset_name,
        source_file_url=url,
        segment_position=segment_position,
        chunk_id=chunk_id,
        document_id=document_id,
        knowledge_id=knowledge_id,
        metadata=metadata or {},
    )


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


def web_chunk_of(
    *, content: str, title: str, url: str, score: float, site_name: str, date: str
) -> UnifiedChunk:
    """A web chunk (design.md §9 rule 2): the subtitle is ``site · date`` with the fallback
    chain, the document name is the URL, the date is a day (``YYYY-MM-DD``)."""
    host = site_host(url)
    date = date[:10]
    return UnifiedChunk(
        content=content,
        source_type="web",
        document_title=title,
        url=url,
        score=score,
        display_subtitle=web_subtitle(site_name, host, date),
        document_name=url,
        site_name=site_name,
        site_host=host,
        source_file_url=url,
        published_date=date,
    )


def chunk_from_source(source: dict[str, Any], score: float) -> UnifiedChunk:
    """A knowledge-base chunk from its stored document."""
    position = source.get("segment_position")
    metadata = source.get("metadata")
    return rag_chunk(
        content=text(source.get("content")),
        document_title=text(source.get("document_title")),
        document_name=text(source.get("document_name")),
        dataset_name=text(source.get("dataset_name")),
        url=text(source.get("source_file_url")),
        score=score,
        segment_position=position if isinstance(position, int) else 0,
        chunk_id=source.get("chunk_id"),
        document_id=source.get("document_id"),
        knowledge_id=source.get("knowledge_id"),
        metadata=metadata if isinstance(metadata, dict) else None,
    )


def number_chunks(chunks: list[UnifiedChunk]) -> list[UnifiedChunk]:
    """The chunks with ``id`` set to their 1-based position, as strings."""
    return [c.model_copy(update={"id": str(i)}) for i, c in enumerate(chunks, start=1)]
