"""The principal a request acts for (DESIGN §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode


@dataclass(frozen=True, slots=True)
class Principal:
    """Tenant, optional user id and effective roles; no user and no roles = anonymous."""

    tenant: str
    user_id: str | None = None
    roles: frozenset[str] = field(default_factory=frozenset)
    key_name: str | None = None

    @property
    def anonymous(self) -> bool:
        """Whether this principal has no identity at all (public chunks only)."""
        return self.user_id is None and not self.roles


def key_principal(key: ApiKeyConfig) -> Principal:
    """The principal a key stands for before any caller claim is considered."""
    roles = frozenset(key.roles) if key.mode is IdentityMode.FIXED else frozenset()
    return Principal(tenant=key.tenant, roles=roles, key_name=key.name)
