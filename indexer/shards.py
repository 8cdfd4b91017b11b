"""A source split across machines: ``retrieval-indexer index SRC --shard I/N`` takes exactly the
objects whose document id falls in shard ``I`` of ``N`` (a Kubernetes Job in Indexed completion
mode runs one pod per shard: ``JOB_COMPLETION_INDEX`` and ``RSVC_INDEXER_SHARDS``).

The shard of an object is its document id (a SHA-256 of the knowledge base, the object's
identity and the tenant) modulo ``N``: every object is in exactly one shard, the same one on
every run, whatever the listing's order or page size — and a document already in the index
knows its shard from its id alone, so a shard prunes only its own documents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_FORM = re.compile(r"^\s*(\d{1,6})\s*/\s*(\d{1,6})\s*$")
MAX_SHARDS = 100_000


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count`` (0 ≤ index < count)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N``; ValueError saying what is wrong."""
        match = _FORM.match(text)
        if not match:
            raise ValueError(f"--shard {text!r} is not I/N (the shard's index from 0, the count)")
        index, count = int(match[1]), int(match[2])
        if not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"--shard {text!r}: the count must be 1 to {MAX_SHARDS:,}")
        if index >= count:
            raise ValueError(f"--shard {text!r}: the index must be 0 to {count - 1}")
        return cls(index, count)

    def holds(self, document_id: str) -> bool:
        """Whether the document ``document_id`` (hex) belongs to this shard."""
        return int(document_id[:15], 16) % self.count == self.index

    def run_id(self, knowledge_id: str) -> str:
        """The id of this shard's run record (each shard keeps its own)."""
        return f"{knowledge_id}@shard-{self.index}-of-{self.count}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def from_environment(environ: Mapping[str, str]) -> Shard | None:
    """The shard a Kubernetes indexed Job gives this pod (``JOB_COMPLETION_INDEX`` and
    ``RSVC_INDEXER_SHARDS``), or None; ValueError when only one is set or either is wrong."""
    index, count = environ.get("JOB_COMPLETION_INDEX"), environ.get("RSVC_INDEXER_SHARDS")
    if index is None and count is None:
        return None
    if index is None or count is None:
        raise ValueError(
            "JOB_COMPLETION_INDEX and RSVC_INDEXER_SHARDS go together (an indexed Job sets the "
            "first, its completions count is the second)"
        )
    return Shard.parse(f"{index}/{count}")
