"""UnifiedChunks as Dify External Knowledge records."""

from __future__ import annotations

from typing import Any

from retrieval_svc.chunks import UnifiedChunk, number_chunks
from retrieval_svc.dify.schemas import Record
from retrieval_svc.merge import ordered


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


def dify_chunks(
    rag: list[UnifiedChunk],
    web: list[UnifiedChunk],
    *,
    top_k: int,
    score_threshold: float,
) -> list[UnifiedChunk]:
    """At most ``top_k`` chunks for Dify: knowledge base first, web after, numbered.

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
