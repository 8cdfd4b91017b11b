"""What an indexing run did: the report the CLI prints, the console shows and metrics export."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

from retrieval_svc import reasons

# A run that could not list its whole source prunes nothing, and says so.
NOT_PRUNED = "not pruned: the listing did not complete (what it did not reach is unknown, not gone)"

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
    # Failed documents whose older chunks were taken out: their roles can no longer be
    # decided, or they changed, so the old chunks might answer wider than the source says.
    documents_withdrawn: int = 0
    prune_note: str = ""  # why the run pruned, or why it did not
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    embedding_s: float = 0.0
    chunks_failed: int = 0
    stale_chunks_deleted: int = 0
    bytes_read: int = 0
    # Documents that failed only for want of LibreOffice, by suffix (.doc: 7): the summary
    # says how many and how to install it (their failures beyond the kept ones are not listed).
    needs_libreoffice: dict[str, int] = field(default_factory=dict)
    # Parser worker processes started (the pool's, and each one that replaced another): one
    # per worker unless a document passed a limit or a worker held too much (indexer.workers).
    parser_workers_started: int = 0
    duration_s: float = 0.0
    failures: list[dict[str, str]] = field(default_factory=list)
    # Files the listing passed over, by reason ("unsupported .vsdx": 7), with a few names each.
    passed_over: dict[str, int] = field(default_factory=dict)
    passed_over_examples: dict[str, list[str]] = field(default_factory=dict)
    # A share's documents a deny naming a SID no directory sync read refused to every person
    # (fail closed), by that SID, with a few names each.
    fail_closed: dict[str, int] = field(default_factory=dict)
    fail_closed_examples: dict[str, list[str]] = field(default_factory=dict)
    # Documents whose roles changed this run (re-tagged or withdrawn), the first ``KEPT``.
    roles_changed: list[str] = field(default_factory=list)
    # The ids of failed documents whose older chunks leave the index at the end of the run
    # (not printed: ``documents_withdrawn`` counts them, their failures say so).
    withdraw_ids: set[str] = field(default_factory=set, repr=False)

    KEPT: ClassVar[int] = 50

    @property
    def ok(self) -> bool:
        """Whether every document and chunk went in."""
        return not self.failures and not self.chunks_failed

    def roles_change(self, documents: list[str]) -> None:
        """Note documents whose roles changed (kept up to ``KEPT`` names)."""
        room = self.KEPT - len(self.roles_changed)
        if room > 0:
            self.roles_changed.extend(documents[:room])

    def withdraw(self, document: str, document_id: str, reason: str) -> None:
        """A failed document whose older chunks must leave: its roles cannot be decided, or
        they changed, so those chunks might answer wider than its source now says."""
        self.fail(document, reason + reasons.WITHDRAWN)
        self.withdraw_ids.add(document_id)
        self.roles_change([document])

    def as_json(self) -> dict[str, Any]:
        """The report as ``--json`` prints it."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out.pop("withdraw_ids")
        return {"ok": self.ok, **out}

    def fail(self, document: str, reason: str) -> None:
        """Record a document that was not indexed."""
        self.documents_failed += 1
        code = reasons.failure_code(reason)
        self.failures.append({"document": document, "reason": reason, "code": code})
        if code == "libreoffice_missing":
            suffix = reason.split(" ", 1)[0]
            self.needs_libreoffice[suffix] = self.needs_libreoffice.get(suffix, 0) + 1
        log.warning("not indexed: %s: %s", document, reason)
