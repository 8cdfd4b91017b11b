"""UnifiedChunks as Dify External Knowledge records."""

from __future__ import annotations

from typing import Any

from retrieval_svc.chunks import UnifiedChunk
from retrieval_svc.dify.schemas import Record


def record_metadata(chunk: UnifiedChunk) -> dict[str, Any]:
    """The record's metadata: custom metadata, then every UnifiedChunk field but content.

    UnifiedChunk fields win over custom metadata of the same name. Dify overwrites ``score``,
    ``title``, ``dataset_id`` and ``dataset_name`` with its own values.
    """
    fields = chunk.model_dump(exclude={"content", "metadata"})
    return {**chunk.metadata, **{k: v for k, v in fields.items() if v is not None}}


def to_record(chunk: UnifiedChunk) -> Record:
    """One Dify record."""
    return Record(
        content=chunk.content,
        score=chunk.score,
        title=chunk.document_title,
        metadata=record_metadata(chunk),
    )
