"""The API keys file reloaded like the policy (issue #58 §2): an edit of ``RSVC_API_KEYS_FILE``
— a key added, revoked, or ``"unknown_user": "refuse"`` set — is in force within
``RSVC_POLICY_CHECK_INTERVAL_S`` seconds, without a restart. A file that does not load (bad
JSON, a duplicate name, an ``oidc`` key without an issuer, a key of a tenant the service did
not start with) leaves the keys in force as they were and says why, in the log and in
``/readyz``; ``/readyz`` also names the digest of the file in force, so an operator can tell
which version the service holds."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from pathlib import Path
from typing import Any

from retrieval_svc.auth.keys import KeyStore
from retrieval_svc.key_entry import ApiKeyConfig, parse_api_keys
from retrieval_svc.settings import Settings
from retrieval_svc.words import say

log = logging.getLogger(__name__)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


class KeyFile:
    """``settings.api_keys_file`` and the keys it put in ``store``."""

    def __init__(self, settings: Settings, store: KeyStore) -> None:
        assert settings.api_keys_file is not None
        self.path: Path = settings.api_keys_file
        self.store, self.settings = store, settings
        data = self._read()
        from_file = {k.name for k in parse_api_keys(data.decode("utf-8"), self.path)}
        # The keys set elsewhere (RSVC_API_KEYS) stay whatever the file says.
        self.inline = [k for k in settings.api_keys if k.name not in from_file]
        self.tenants = set(settings.tenants)
        self.digest = _digest(data)
        self.loaded_at = time.time()
        self.error = ""
        self._stamp = self._stat()

    def _read(self) -> bytes:
        return self.path.read_bytes()

    def _stat(self) -> tuple[int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_mtime_ns, found.st_size

    def check(self) -> bool:
        """Load the file again if it changed; whether new keys are in force."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            data = self._read()
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror}"
            log.error(say("log_keys_file_error", why=self.error))
            return False
        if _digest(data) == self.digest:  # (back to the keys in force: nothing is wrong now)
            self.error = ""
            return False
        try:
            keys = self._validated(parse_api_keys(data.decode("utf-8"), self.path))
        except Exception as exc:  # (any reason the file cannot be used: said, nothing changes)
            self.error = str(exc)
            log.error(say("log_keys_not_reloaded", path=self.path, why=exc))
            return False
        self.store.replace(keys)
        self.digest, self.loaded_at, self.error = _digest(data), time.time(), ""
        log.warning(say("log_keys_reloaded", path=self.path, n=len(keys), digest=self.digest))
        return True

    def _validated(self, from_file: list[ApiKeyConfig]) -> list[ApiKeyConfig]:
        keys = [*self.inline, *from_file]
        names = [k.name for k in keys]
        if repeated := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"API key names must be unique; repeated: {repeated}")
        if not keys and not self.settings.auth_disabled:
            raise ValueError("no API key would be left")
        oidc = [k.name for k in keys if k.mode == "oidc"]
        if oidc and not self.settings.oidc_issuer:
            raise ValueError(f"API keys {oidc} have mode oidc: set RSVC_OIDC_ISSUER")
        if new := sorted({k.tenant for k in keys} - self.tenants):
            raise ValueError(
                f"keys of tenants {new} the service did not start with: restart it, so their "
                "indices are checked"
            )
        return keys

    def view(self) -> dict[str, Any]:
        """What ``/readyz`` says of the file."""
        return {
            "path": str(self.path),
            "digest": self.digest,
            "keys": len(self.store.keys),
            "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.loaded_at)),
            "error": self.error or None,
        }

    async def watch(self, interval_s: float) -> None:
        """Check the file every ``interval_s`` seconds (0: never), until cancelled."""
        if interval_s <= 0:
            return
        while True:
            await asyncio.sleep(interval_s)
            await asyncio.to_thread(self.check)
