"""API keys: configuration entries, hashing, and constant-time lookup (design.md §6)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from retrieval_svc.errors import AuthorizationFailed, MalformedAuthorization

# Keys that documentation, tutorials or lazy configuration tend to use.
_PLACEHOLDERS = ("", "changethis", "changeme", "secret", "password", "test", "dev", "your-api-key")
_PLACEHOLDER_HASHES = frozenset(hashlib.sha256(p.encode()).hexdigest() for p in _PLACEHOLDERS)


class IdentityMode(StrEnum):
    """Where a key's principal gets its roles."""

    CASBIN = "casbin"
    TRUSTED = "trusted"
    SIGNED = "signed"
    OIDC = "oidc"
    FIXED = "fixed"


def hash_key(key: str) -> str:
    """The SHA-256 hex digest under which a key is configured."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key."""
    return "rsvc_" + secrets.token_urlsafe(32)


class ApiKeyConfig(BaseModel):
    """One configured API key."""

    # Configuration errors must never echo a secret back into a log.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field("default", min_length=1, max_length=128)
    knowledge_ids: tuple[str, ...] = ("*",)
    mode: IdentityMode = IdentityMode.CASBIN
    roles: tuple[str, ...] = ()
    token_secret: SecretStr | None = Field(None, min_length=32)  # HS256 wants >= 256 bits
    admin: bool = False  # may call operator endpoints (explain) for any principal of its tenant

    @field_validator("sha256", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("sha256")
    @classmethod
    def _not_placeholder(cls, value: str) -> str:
        if value in _PLACEHOLDER_HASHES:
            raise ValueError("this is the hash of a placeholder key; generate a real one")
        return value

    @model_validator(mode="after")
    def _mode_has_what_it_needs(self) -> Self:
        # Refused at start, naming the key: at request time these would fail every request
        # (signed without a secret) or act anonymous without a word (fixed without roles).
        if self.mode is IdentityMode.SIGNED and self.token_secret is None:
            raise ValueError(
                f"API key {self.name!r} has mode signed but no token_secret: set one "
                "(`retrieval-svc new-key --mode signed` generates a strong one)"
            )
        if self.mode is IdentityMode.FIXED and not self.roles:
            raise ValueError(
                f"API key {self.name!r} has mode fixed but no roles: set the roles it carries "
                "(`retrieval-svc new-key --mode fixed --roles 巡检员,…`)"
            )
        return self

    def may_read(self, knowledge_id: str) -> bool:
        """Whether this key is scoped to ``knowledge_id`` (``*`` patterns allowed)."""
        return any(fnmatchcase(knowledge_id, pattern) for pattern in self.knowledge_ids)


class KeyStore:
    """Finds the configured key for a presented secret, in time independent of the match."""

    def __init__(self, keys: list[ApiKeyConfig]) -> None:
        self._keys = [(bytes.fromhex(k.sha256), k) for k in keys]

    def lookup(self, presented: str) -> ApiKeyConfig:
        """The key whose hash matches ``presented``; raises AuthorizationFailed otherwise."""
        digest = hashlib.sha256(presented.encode("utf-8")).digest()
        found: ApiKeyConfig | None = None
        # Compare against every key so timing does not reveal which one (or whether any) matched.
        for expected, key in self._keys:
            if hmac.compare_digest(digest, expected):
                found = key
        if found is None:
            raise AuthorizationFailed("the API key is not valid")
        return found


def bearer_token(header: str | None) -> str:
    """The key in an ``Authorization: Bearer <key>`` header; raises MalformedAuthorization."""
    if not header:
        raise MalformedAuthorization("missing Authorization header; send 'Bearer <api key>'")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise MalformedAuthorization("Authorization header must be 'Bearer <api key>'")
    return token
