"""The console's session: a signed, short-lived cookie naming an admin key, the CSRF token of
every form tied to it, and its end on the server (itsdangerous signs cookie and tokens).

A session names its key and a digest of the key's hash, so replacing a key's secret ends the
sessions opened with the old one, and removing the key ends them all. Signing out records the
session's nonce in ``<RSVC_INDEX_ALIAS>-console-ended`` in Elasticsearch, which every worker
and replica reads (a realtime GET by id per console request), so a cookie copied before
*Sign out* opens nothing after it; an answer that cannot be had counts as ended. Replicas
need one ``RSVC_CONSOLE_SECRET`` (the chart refuses a console on several replicas without
one) and nothing else: the ended sessions live in the cluster they already share.

The sign-in form carries a token too (login CSRF): ``GET /console/login`` sets a signed,
short-lived cookie with a nonce and puts its HMAC in the form; a sign-in without both is
refused, so another site cannot sign a browser into the console with its own key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from elasticsearch import AsyncElasticsearch, NotFoundError
from itsdangerous import BadSignature, URLSafeTimedSerializer

from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.words import say

log = logging.getLogger(__name__)

COOKIE = "rsvc_console"
LOGIN_COOKIE = "rsvc_console_login"
LOGIN_MAX_AGE_S = 1800


def ended_index(index_alias: str) -> str:
    """Where ended sessions are recorded (apart from the chunk indices' ``<alias>.*``)."""
    return f"{index_alias}-console-ended"


class Sessions:
    """Issue, read and end console sessions with one secret (configured, or made per
    process), ended ones recorded in ``index`` of ``es``."""

    def __init__(
        self, secret: str | None, max_age_s: int, es: AsyncElasticsearch, index: str
    ) -> None:
        self.secret = secret or secrets.token_urlsafe(48)
        self.max_age_s = max_age_s
        self._signer = URLSafeTimedSerializer(self.secret, salt="rsvc-console-session")
        self._login = URLSafeTimedSerializer(self.secret, salt="rsvc-console-login")
        self._es = es
        self._index = index

    def issue(self, key: ApiKeyConfig) -> str:
        """A cookie value for a signed-in admin key."""
        return self._signer.dumps(
            {"key": key.name, "kh": key.sha256[:16], "nonce": secrets.token_urlsafe(16)}
        )

    def read(self, cookie: str | None, key_of: Any) -> tuple[ApiKeyConfig, dict[str, str]] | None:
        """The admin key and session in ``cookie`` if it is ours, not older than
        ``max_age_s``, and of a key ``key_of(name)`` still has with the same secret."""
        if not cookie:
            return None
        try:
            session = self._signer.loads(cookie, max_age=self.max_age_s)
        except BadSignature:
            return None
        if not isinstance(session, dict) or not {"key", "kh", "nonce"} <= session.keys():
            return None
        key: ApiKeyConfig | None = key_of(session["key"])
        if key is None or not hmac.compare_digest(key.sha256[:16], str(session["kh"])):
            return None
        return key, session

    async def live(self, session: dict[str, str]) -> bool:
        """Whether the session was not signed out (on any worker or replica)."""
        try:
            await self._es.get(index=self._index, id=session["nonce"], source=False)
        except NotFoundError:  # (no such record, or no index yet: nobody signed out)
            return True
        except Exception as exc:  # unknown: fail closed
            log.warning(say("log_session_check_failed", why=exc))
            return False
        return False

    async def end(self, session: dict[str, str]) -> None:
        """Record the session as ended, for every worker and replica; forget old records."""
        now = datetime.now(UTC)
        until = now + timedelta(seconds=self.max_age_s)
        await self._es.index(
            index=self._index,
            id=session["nonce"],
            document={"ended_at": now.isoformat(), "until": until.isoformat()},
            refresh="wait_for",
        )
        try:  # records past their session's lifetime mean nothing any more
            await self._es.delete_by_query(
                index=self._index,
                query={"range": {"until": {"lt": now.isoformat()}}},
                conflicts="proceed",
                wait_for_completion=False,
            )
        except Exception as exc:
            log.info(say("log_sessions_not_forgotten", why=exc))

    def csrf(self, session: dict[str, str]) -> str:
        """The CSRF token of a session's forms."""
        return hmac.new(self.secret.encode(), session["nonce"].encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: dict[str, str], token: str | None) -> bool:
        """Whether a form carried its session's token."""
        return token is not None and hmac.compare_digest(self.csrf(session), token)

    def login_token(self) -> tuple[str, str]:
        """A sign-in form's cookie value and the token its form carries."""
        nonce = secrets.token_urlsafe(16)
        return self._login.dumps(nonce), self._login_mac(nonce)

    def login_ok(self, cookie: str | None, token: str | None) -> bool:
        """Whether a sign-in carried the token of the form this browser was given."""
        if not cookie or not token:
            return False
        try:
            nonce = self._login.loads(cookie, max_age=LOGIN_MAX_AGE_S)
        except BadSignature:
            return False
        return isinstance(nonce, str) and hmac.compare_digest(self._login_mac(nonce), token)

    def _login_mac(self, nonce: str) -> str:
        return hmac.new(
            self.secret.encode(), b"login:" + nonce.encode(), hashlib.sha256
        ).hexdigest()
