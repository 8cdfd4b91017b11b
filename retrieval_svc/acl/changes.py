"""A policy line added or removed: the unit every way a grant is written passes through the
owner model (``owners``) and records in the history (``history``)."""

from __future__ import annotations

from dataclasses import dataclass

Rule = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Change:
    """One policy line added or removed: ``("g", member, role, tenant)`` or
    ``("p", subject, tenant, knowledge_ids, "read")``."""

    op: str  # "add" | "remove"
    ptype: str
    values: Rule

    @property
    def tenant(self) -> str:
        return self._at(2 if self.ptype == "g" else 1)

    @property
    def subject(self) -> str:
        return self._at(0)

    @property
    def target(self) -> str:
        """The role (``g``) or the knowledge-base pattern (``p``)."""
        return self._at(1 if self.ptype == "g" else 2)

    def _at(self, index: int) -> str:
        """A value, or "" for a line too short to have it (a deleted row that meant nothing)."""
        return self.values[index] if len(self.values) > index else ""
