"""One document's bytes to its chunks, under its budget (pure: no I/O). The indexer runs it in
a worker process (``indexer.workers``) or, for a library caller, in a thread."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

from indexer.budget import Budget
from indexer.chunking import ChunkOptions
from indexer.documents import SourceObject, build_chunks
from indexer.formats.base import OcrMode, Reading
from indexer.parsers import parse
from indexer.permissions import Outside
from indexer.sources import ObjectRef
from retrieval_svc.acl import DEFAULT_TENANT


@dataclass(frozen=True, slots=True)
class ChunkSettings:
    """What turning any document of a run into chunks needs (picklable, sent to workers)."""

    knowledge_id: str
    dataset_name: str
    tz: tzinfo
    chunk: ChunkOptions = field(default_factory=ChunkOptions)
    tenant: str = DEFAULT_TENANT
    budget: Budget = field(default_factory=Budget)
    ocr: OcrMode = "auto"
    source: str = ""  # the name of the source the run reads (stored on every chunk)


def document_chunks(
    ref: ObjectRef,
    data: bytes,
    layers: tuple[tuple[str, Mapping[str, Any]], ...],
    url: str,
    outside: Outside,
    settings: ChunkSettings,
    grant: Callable[[float], None] | None = None,
) -> list[dict[str, Any]]:
    """The chunk documents of one object's bytes; ``layers`` are its sidecar and manifest
    metadata with their names, ``outside`` its folder rule and roles tag; ``grant`` asks the
    worker's parent for more time (a page read by OCR). Raises DocumentError (a
    ``BudgetError`` past a limit) when it cannot be indexed."""
    budget = settings.budget
    budget.check_bytes(len(data))
    reading = Reading(budget, settings.ocr, grant) if grant else Reading(budget, settings.ocr)
    parsed = parse(ref.key, data, reading)
    budget.check_chars(len(parsed.text))
    obj = SourceObject(
        uri=ref.uri,
        identity=ref.identity,
        name=ref.key,
        text=parsed.text,
        etag=ref.etag,
        front_matter=parsed.front_matter,
        metadata_layers=tuple(layer for _, layer in layers),
        layer_names=tuple(name for name, _ in layers),
        outside=outside,
        sections=tuple((part.text, part.marks) for part in parsed.parts),
        own_title=parsed.title,
        info=parsed.info,
    )
    return build_chunks(
        obj,
        knowledge_id=settings.knowledge_id,
        dataset_name=settings.dataset_name,
        url=url,
        options=settings.chunk,
        tz=settings.tz,
        tenant=settings.tenant,
        source=settings.source,
    )
