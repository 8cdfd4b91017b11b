"""API keys: configuration entries, hashing, and constant-time lookup (design.md §6)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from retrieval_svc.errors import AuthorizationFailed, MalformedAuthorization
from retrieval_svc.key_entry import ApiKeyConfig, IdentityMode

__all__ = [  # the key entry and the modes are configuration: they live in settings
    "ApiKeyConfig",
    "IdentityMode",
    "KeyStore",
    "bearer_token",
    "hash_key",
    "new_key",
]


def hash_key(key: str) -> str:
    """The SHA-256 hex digest under which a key is configured."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key."""
    return "rsvc_" + secrets.token_urlsafe(32)


class KeyStore:
    """Finds the configured key for a presented secret, in time independent of the match."""

    def __init__(self, keys: list[ApiKeyConfig]) -> None:
        self._keys = [(bytes.fromhex(k.sha256), k) for k in keys]

    @property
    def keys(self) -> list[ApiKeyConfig]:
        """The keys in force."""
        return [key for _, key in self._keys]

    def replace(self, keys: list[ApiKeyConfig]) -> None:
        """Put ``keys`` in force (one assignment: a request sees the old set or the new)."""
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
            raise AuthorizationFailed("the API key is not valid", reason="wrong_key")
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
