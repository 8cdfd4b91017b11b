"""The principal a request acts for (design.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_svc.acl.identities import NO_ONE, Identity


@dataclass(frozen=True, slots=True)
class Principal:
    """Tenant, optional user id and effective roles; no user and no roles = anonymous."""

    tenant: str
    user_id: str | None = None
    roles: frozenset[str] = field(default_factory=frozenset)
    key_name: str | None = None
    # What the user id the caller sent resolved to (design.md §17): ``user_id`` is the
    # person's own id when it resolved, the id as sent when it did not.
    identity: Identity = NO_ONE

    @property
    def anonymous(self) -> bool:
        """Whether this principal has no identity at all (public chunks only)."""
        return self.user_id is None and not self.roles
