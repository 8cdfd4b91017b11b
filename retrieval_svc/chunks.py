"""UnifiedChunk: the one chunk shape for knowledge-base and web results (design.md §9)."""

from __future__ import annotations

from typing import Any, Literal

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


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def chunk_from_source(source: dict[str, Any], score: float) -> UnifiedChunk:
    """A knowledge-base chunk from its stored document (design.md §9 rule 1)."""
    document_name = _text(source.get("document_name"))
    dataset_name = _text(source.get("dataset_name"))
    url = _text(source.get("source_file_url"))
    position = source.get("segment_position")
    metadata = source.get("metadata")
    return UnifiedChunk(
        content=_text(source.get("content")),
        source_type="rag",
        document_title=_text(source.get("document_title")) or document_name,
        url=url,
        score=score,
        display_subtitle=dataset_name,
        document_name=document_name,
        dataset_name=dataset_name,
        source_file_url=url,
        segment_position=position if isinstance(position, int) else 0,
        chunk_id=source.get("chunk_id"),
        document_id=source.get("document_id"),
        knowledge_id=source.get("knowledge_id"),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def number_chunks(chunks: list[UnifiedChunk]) -> list[UnifiedChunk]:
    """The chunks with ``id`` set to their 1-based position, as strings."""
    return [c.model_copy(update={"id": str(i)}) for i, c in enumerate(chunks, start=1)]
