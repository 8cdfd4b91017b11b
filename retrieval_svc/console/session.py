"""The console's session: a signed, short-lived cookie naming an admin key, and the CSRF
token of every form, tied to that session (itsdangerous signs both)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE = "rsvc_console"


class Sessions:
    """Issue and read console sessions with one secret (configured, or made per process)."""

    def __init__(self, secret: str | None, max_age_s: int) -> None:
        self.secret = secret or secrets.token_urlsafe(48)
        self.max_age_s = max_age_s
        self._signer = URLSafeTimedSerializer(self.secret, salt="rsvc-console-session")

    def issue(self, key_name: str) -> str:
        """A cookie value for a signed-in admin key."""
        return self._signer.dumps({"key": key_name, "nonce": secrets.token_urlsafe(16)})

    def read(self, cookie: str | None) -> dict[str, str] | None:
        """The session in ``cookie`` if it is ours and not older than ``max_age_s``."""
        if not cookie:
            return None
        try:
            session = self._signer.loads(cookie, max_age=self.max_age_s)
        except BadSignature:
            return None
        return session if isinstance(session, dict) and "key" in session else None

    def csrf(self, session: dict[str, str]) -> str:
        """The CSRF token of a session's forms."""
        return hmac.new(self.secret.encode(), session["nonce"].encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: dict[str, str], token: str | None) -> bool:
        """Whether a form carried its session's token."""
        return token is not None and hmac.compare_digest(self.csrf(session), token)
