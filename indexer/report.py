"""What an indexing run did: the report the CLI prints, the console shows and metrics export."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("indexer.pipeline")  # (the run's one log, as before the split)


@dataclass(slots=True)
class Report:
    """What a run did; ``ok`` is false when any document or chunk failed."""

    source: str
    knowledge_id: str
    dry_run: bool = False
    documents_seen: int = 0
    documents_indexed: int = 0
    documents_skipped: int = 0
    documents_retagged: int = 0  # unchanged, but their roles changed: set in place
    documents_failed: int = 0
    documents_pruned: int = 0
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    embedding_s: float = 0.0
    chunks_failed: int = 0
    stale_chunks_deleted: int = 0
    bytes_read: int = 0
    duration_s: float = 0.0
    failures: list[dict[str, str]] = field(default_factory=list)
    # Files the listing passed over, by reason ("unsupported .vsdx": 7), with a few names each.
    passed_over: dict[str, int] = field(default_factory=dict)
    passed_over_examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every document and chunk went in."""
        return not self.failures and not self.chunks_failed

    def fail(self, document: str, reason: str) -> None:
        """Record a document that was not indexed."""
        self.documents_failed += 1
        self.failures.append({"document": document, "reason": reason})
        log.warning("not indexed: %s: %s", document, reason)
