"""End-user tokens from the company's OpenID Connect provider (the ``oidc`` identity mode).

The caller forwards the user's ID or access token (as ``principal_token``). It is verified
against the provider's published keys (JWKS): signature with an asymmetric algorithm only
(never ``HS*``, never ``none``), issuer, audience, expiry with a small clock skew. The user
id comes from one claim (``sub`` by default), roles from a claim path (``groups``,
``realm_access.roles``, …); Casbin then adds its own, as for every mode. With ``email`` as
the user id, the token must also say ``email_verified: true`` (OpenID Connect Core §5.1): an
address a user typed into their profile is not proof they hold it.

PyJWT verifies (``jwt.decode``) and parses keys (``PyJWKSet``). Fetching is ours, because the
policy is the point: ``PyJWKClient`` fetches synchronously, refetches on *every* unknown
``kid`` (a flood of made-up ``kid``\\ s would hammer the provider) and drops its keys when a
refresh fails. Here keys are fetched with the service's async HTTP client, refreshed when
older than ``jwks_max_age_s`` or when a token names an unknown ``kid`` — at most once per
``jwks_min_refresh_s`` either way, one fetch at a time — and kept through an outage. Only when
no key was ever fetched does a token get a 503 (``IdentityProviderUnavailable``), not a 401.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from retrieval_svc.acl.values import RoleValueError, parse_roles
from retrieval_svc.errors import IdentityProviderUnavailable, InvalidPrincipalToken
from retrieval_svc.settings import OIDC_ALGORITHM_FAMILIES
from retrieval_svc.words import say

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OidcConfig:
    """How to verify the provider's tokens (``RSVC_OIDC_*``)."""

    issuer: str
    audience: tuple[str, ...]
    jwks_url: str | None = None  # None: discovered from the issuer's openid-configuration
    user_claim: str = "sub"
    roles_claim: str = "groups"  # a dotted path: realm_access.roles
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256")
    leeway_s: float = 30.0
    jwks_max_age_s: float = 600.0
    jwks_min_refresh_s: float = 30.0
    timeout_s: float = 3.0


@dataclass(frozen=True, slots=True)
class VerifiedUser:
    """What a verified token says about the end user."""

    user_id: str
    roles: tuple[str, ...]


def claim_at(payload: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``payload`` (``realm_access.roles``), or None.

    A claim whose own name contains dots (some providers use URLs as claim names) is found
    too: the whole path is tried as one name first.
    """
    if path in payload:
        return payload[path]
    node: Any = payload
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class OidcVerifier:
    """Verifies the provider's tokens, with the provider's keys cached as described above."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        config: OidcConfig,
        *,
        on_fetch: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._http = http
        self._on_fetch = on_fetch or (lambda _outcome: None)
        self._clock = clock
        self._lock = asyncio.Lock()
        self._keys: dict[str | None, SigningKey] = {}
        self._jwks_url = config.jwks_url
        self._fetched_at: float | None = None  # last successful fetch
        self._tried_at: float | None = None  # last attempt, successful or not
        self.last_error: str | None = None

    async def verify(self, token: str) -> VerifiedUser:
        """The user a token names; 401 (``InvalidPrincipalToken``) for any invalid token,
        503 (``IdentityProviderUnavailable``) when the provider's keys were never had."""
        cfg = self.config
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidPrincipalToken(f"the identity token is malformed: {exc}") from exc
        alg = header.get("alg")
        if alg not in cfg.algorithms:
            raise InvalidPrincipalToken(
                f"the identity token's algorithm {str(alg)[:16]!r} is not accepted "
                f"(accepted: {', '.join(cfg.algorithms)})"
            )
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        if alg not in key.algorithms:
            raise InvalidPrincipalToken(
                f"the identity token's algorithm {alg} does not fit its signing key"
            )
        try:
            payload = jwt.decode(
                token,
                key.jwk.key,
                algorithms=[alg],
                audience=list(cfg.audience),
                issuer=cfg.issuer,
                leeway=cfg.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidPrincipalToken("the identity token has expired") from exc
        except jwt.PyJWTError as exc:
            raise InvalidPrincipalToken(f"the identity token is invalid: {exc}") from exc
        user_id = claim_at(payload, cfg.user_claim)
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidPrincipalToken(
                f"the identity token has no {cfg.user_claim!r} claim naming the user"
            )
        if cfg.user_claim == "email" and payload.get("email_verified") not in (True, "true"):
            raise InvalidPrincipalToken(
                "the identity token's email is not verified (email_verified is not true): "
                "an unverified address names no one"
            )
        try:
            roles = tuple(parse_roles(claim_at(payload, cfg.roles_claim)))
        except RoleValueError as exc:
            raise InvalidPrincipalToken(
                f"the identity token's {cfg.roles_claim!r} claim is not a list of roles: {exc}"
            ) from exc
        return VerifiedUser(user_id=user_id.strip(), roles=roles)

    async def _key(self, kid: str | None) -> SigningKey:
        cfg = self.config
        if self._fresh() and (found := self._find(kid)) is not None:
            return found
        async with self._lock:  # one fetch at a time; waiters then use its result
            if not (self._fresh() and self._find(kid) is not None) and self._may_fetch():
                await self._refresh()
        found = self._find(kid)
        if found is not None:
            return found
        if not self._keys:
            raise IdentityProviderUnavailable(
                f"no signing keys from the identity provider {cfg.issuer} yet "
                f"({self.last_error or 'not fetched'}); retried at most every "
                f"{cfg.jwks_min_refresh_s:g} s"
            )
        shown = "no kid" if kid is None else f"kid {kid[:64]!r}"
        raise InvalidPrincipalToken(
            f"the identity token's signing key ({shown}) is not one the provider publishes"
        )

    def _find(self, kid: str | None) -> SigningKey | None:
        if kid is None and len(self._keys) == 1:  # a provider with one key may omit kid
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    def _fresh(self) -> bool:
        return (
            self._fetched_at is not None
            and self._clock() - self._fetched_at < self.config.jwks_max_age_s
        )

    def _may_fetch(self) -> bool:
        return (
            self._tried_at is None
            or self._clock() - self._tried_at >= self.config.jwks_min_refresh_s
        )

    async def _refresh(self) -> None:
        """Fetch the provider's keys; on any failure keep the ones we have."""
        self._tried_at = self._clock()
        try:
            if self._jwks_url is None:
                self._jwks_url = await self._discover()
            data = await self._get_json(self._jwks_url)
            keys = _usable_keys(data)
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            log.warning(
                say("log_idp_keys", n=len(self._keys), why=self.last_error),
            )
            self._on_fetch("error")
            return
        self._keys, self._fetched_at, self.last_error = keys, self._clock(), None
        self._on_fetch("ok")

    async def _discover(self) -> str:
        issuer = self.config.issuer
        doc = await self._get_json(issuer.rstrip("/") + "/.well-known/openid-configuration")
        if doc.get("issuer") != issuer:
            raise ValueError(f"the discovery document names issuer {doc.get('issuer')!r}")
        url = doc.get("jwks_uri")
        if not isinstance(url, str) or not url:
            raise ValueError("the discovery document has no jwks_uri")
        return url

    async def _get_json(self, url: str) -> dict[str, Any]:
        resp = await self._http.get(url, timeout=self.config.timeout_s)
        resp.raise_for_status()
        data = resp.json()
        if not isinstance(data, dict):
            raise ValueError(f"{url} did not answer with a JSON object")
        return data


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One of the provider's public keys and the algorithms a token signed by it may name."""

    jwk: jwt.PyJWK
    algorithms: frozenset[str]


def _usable_keys(data: Mapping[str, Any]) -> dict[str | None, SigningKey]:
    """The RSA and EC signing keys of a JWKS, by ``kid``; other keys are ignored.

    A key that declares its ``alg`` is used with that algorithm only; an EC key with the one
    its curve means; an RSA key without ``alg`` with any RSA algorithm (RS*/PS*).
    """
    keys: dict[str | None, SigningKey] = {}
    for entry in data.get("keys") or []:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        family = OIDC_ALGORITHM_FAMILIES.get(str(entry.get("kty")))
        if family is None:
            continue
        try:
            jwk = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue  # a key this library cannot use (unknown curve, bad numbers)
        declared = entry.get("alg")
        if declared is not None or entry["kty"] == "EC":
            algorithms = frozenset({jwk.algorithm_name}) & family
        else:
            algorithms = family
        if algorithms:
            keys[jwk.key_id] = SigningKey(jwk, algorithms)
    if not keys:
        raise ValueError("the JWKS has no usable RSA or EC signing keys")
    return keys
