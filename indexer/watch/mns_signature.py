"""Alibaba Cloud MNS's HTTP push, verified: a topic subscription with an HTTP endpoint cannot
send a bearer token, so MNS signs each request instead, and ``watch --listen --listen-mns``
takes a delivery only when that signature verifies.

As Alibaba Cloud documents it ("Verify HTTP push message signatures"): ``Authorization`` is
the base64 of an RSA signature (PKCS #1 v1.5, SHA-1) over the UTF-8 string

    METHOD \\n Content-MD5 \\n Content-Type \\n Date \\n
    x-mns-* headers (name lower-cased, sorted, ``name:value\\n`` each) + the request's path

(``x-mns-date``, when sent, stands for ``Date``), made with the key of the X.509 certificate
whose URL ``x-mns-signing-cert-url`` holds in base64. MNS refuses requests dated more than 15
minutes from its clock; so does this.

Whoever can reach the port chooses every header, so, in this order and before any network:
the request is dated within ``WINDOW_S`` of this host's clock (replay window); the body's MD5
is the ``Content-MD5`` sent (the signature covers that header, not the body: without it any
body would pass under a captured signature); the certificate URL is one that may be fetched
(``indexer.watch.mns_cert``: ``https`` on an allowed host); the same signature was not taken
already (an exact replay inside the window). Only then is the certificate fetched (as
``mns_cert`` says: no redirect, a size, a deadline) — once per URL (cached), one fetch at a
time and at most ``FETCHES_PER_MINUTE`` for one sender (an IPv4 address, an IPv6 /64: a
sender that asks for certificates that are not there spends its own budget, not MNS's) and
``FETCHES_PER_MINUTE_IN_ALL``. The certificate must be valid now by this host's clock, give
or take ``CERT_SKEW_S`` (clocks drift; the request's own date is held to ``WINDOW_S``): an
expired key, or one not yet in force, signs nothing. Nothing here raises: a request is
refused with a problem code.
"""

from __future__ import annotations

import base64
import binascii
import collections
import email.utils
import hashlib
import hmac
import ipaddress
import threading
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from indexer.watch.mns_cert import (
    CERT_SKEW_S,
    DEFAULT_CERT_HOSTS,
    FETCH_DEADLINE_S,
    UNAVAILABLE,
    CertHost,
    CertUrl,
    Refused,
    SigningCert,
    cert_hosts,
    cert_url,
    fetched_within,
    signing_cert,
)

__all__ = [
    "CERT_SKEW_S", "DEFAULT_CERT_HOSTS", "SIGNATURE_PROBLEMS", "UNAVAILABLE", "CertHost",
    "MnsVerifier", "cert_hosts", "sender_of", "string_to_sign",
]  # fmt: skip

WINDOW_S = 15 * 60.0  # a request dated further from now is refused (MNS's own window)
FETCHES_PER_MINUTE = 10  # certificate fetches of URLs not yet cached, for one sender
FETCHES_PER_MINUTE_IN_ALL = 60  # (and for every sender together)
CACHED_CERTS = 32
CACHE_S = 24 * 3600.0  # a certificate kept this long at most, and never past its expiry
RECHECK_S = 5 * 60.0  # a certificate out of its dates is fetched again after this long
REPLAYS_KEPT = 10_000

# Why a pushed request was refused (the metric's label, the word table's rows ``event_…``).
SIGNATURE_PROBLEMS = (
    "mns_stale", "mns_bad_signature", "mns_cert_refused", "mns_cert_unavailable", "mns_replayed",
    "mns_cert_expired",
)  # fmt: skip


def string_to_sign(method: str, path: str, headers: dict[str, str]) -> bytes:
    """What MNS signs, from the request's headers (names lower-cased, each sent once)."""
    mns = sorted((k, v) for k, v in headers.items() if k.startswith("x-mns-"))
    date = headers.get("x-mns-date") or headers.get("date", "")
    lines = [method.upper(), headers.get("content-md5", ""), headers.get("content-type", ""), date]
    return ("\n".join(lines) + "\n" + "".join(f"{k}:{v}\n" for k, v in mns) + path).encode()


class MnsVerifier:
    """Whether a pushed request is MNS's, signed as documented (thread-safe)."""

    def __init__(
        self, hosts: tuple[CertHost, ...], ca_file: str | None = None, window_s: float = WINDOW_S
    ) -> None:
        self.hosts, self.ca_file, self.window_s = hosts, ca_file, window_s
        self._keys: collections.OrderedDict[str, tuple[SigningCert, float]] = (
            collections.OrderedDict()
        )  # URL → the certificate, and until when (this host's clock) it is kept
        self._taken: dict[bytes, float] = {}  # signature → until when it is a replay
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        self._fetched: dict[str, collections.deque[float]] = {}  # by sender: when

    def problem(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes, sender: str = ""
    ) -> str:
        """``""`` when MNS signed this request (its signature is then kept as taken), else
        why not (``SIGNATURE_PROBLEMS``). ``sender``: the address it came from (whose
        certificate fetches budget it spends). Never raises."""
        try:
            self._verify(method, path, headers, body, sender)
        except Refused as exc:
            return exc.problem
        except Exception:  # (a shape no check here foresaw: refused, never raised)
            return "mns_bad_signature"
        return ""

    def _verify(
        self, method: str, path: str, raw: list[tuple[str, str]], body: bytes, sender: str
    ) -> None:
        headers = _once_each(raw)
        signature = _signature(headers.get("authorization", ""))
        now = time.time()
        when = _date(headers.get("x-mns-date") or headers.get("date", ""))
        if when is None or abs(now - when) > self.window_s:
            raise Refused("mns_stale")
        if not _md5_matches(headers.get("content-md5", ""), body):
            raise Refused("mns_bad_signature")
        where = cert_url(headers.get("x-mns-signing-cert-url", ""), self.hosts)
        with self._lock:
            if self._taken.get(signature, 0.0) > now:
                raise Refused("mns_replayed")
        cert = self._cert(where, sender)
        if not cert.valid_at(time.time()):
            raise Refused("mns_cert_expired")
        try:
            cert.key.verify(signature, string_to_sign(method, path, headers), padding.PKCS1v15(),
                       hashes.SHA1())  # fmt: skip
        except InvalidSignature:
            raise Refused("mns_bad_signature") from None
        with self._lock:
            if self._taken.get(signature, 0.0) > now:  # (the same, verified twice at once)
                raise Refused("mns_replayed")
            if len(self._taken) >= REPLAYS_KEPT:
                self._taken = {s: t for s, t in self._taken.items() if t > now}
            self._taken[signature] = when + self.window_s + 1.0

    def _cert(self, where: CertUrl, sender: str) -> SigningCert:
        """The signing certificate: cached, else fetched (one fetch at a time, within the
        sender's budget and everyone's)."""
        if (cached := self._cached(where)) is not None:
            return cached
        if not self._fetching.acquire(timeout=FETCH_DEADLINE_S):
            raise Refused(UNAVAILABLE)
        try:
            if (cached := self._cached(where)) is not None:
                return cached
            self._spend(sender_of(sender))
            cert = signing_cert(fetched_within(where, self.ca_file))
        finally:
            self._fetching.release()
        now = time.time()  # (kept a day, never past its expiry; out of its dates, 5 minutes)
        until = min(now + CACHE_S, max(cert.not_after + CERT_SKEW_S, now + RECHECK_S))
        with self._lock:
            self._keys[where.key] = (cert, until)
            while len(self._keys) > CACHED_CERTS:
                self._keys.popitem(last=False)
        return cert

    def _spend(self, whose: str) -> None:
        """One fetch from ``whose`` budget (and everyone's), else refused: unavailable."""
        now = time.monotonic()
        for one in list(self._fetched):
            times = self._fetched[one]
            while times and times[0] < now - 60.0:
                times.popleft()
            if not times:
                del self._fetched[one]
        mine = self._fetched.get(whose, ())
        in_all = sum(len(times) for times in self._fetched.values())
        if len(mine) >= FETCHES_PER_MINUTE or in_all >= FETCHES_PER_MINUTE_IN_ALL:
            raise Refused(UNAVAILABLE)
        self._fetched.setdefault(whose, collections.deque()).append(now)

    def _cached(self, where: CertUrl) -> SigningCert | None:
        with self._lock:
            found = self._keys.get(where.key)
            if found is None or found[1] < time.time():
                return None
            self._keys.move_to_end(where.key)
            return found[0]


def sender_of(address: str) -> str:
    """Who an address is, for what a sender may spend (certificate fetches, the listener's
    connections): its IPv4 address, its IPv6 address's /64 (one host holds a whole /64)."""
    try:
        parsed = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(getattr(parsed, "ipv4_mapped", None) or parsed)


def _once_each(raw: list[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-cased name; one sent twice that the signature covers is refused (two
    readers could read different ones)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        name = name.strip().lower()
        signed = name.startswith("x-mns-") or name in ("authorization", "content-md5",
                                                        "content-type", "date")  # fmt: skip
        if name in headers and signed:
            raise Refused("mns_bad_signature")
        headers.setdefault(name, value.strip())
    return headers


def _signature(authorization: str) -> bytes:
    try:
        signature = base64.b64decode(authorization.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise Refused("mns_bad_signature") from None
    if not 64 <= len(signature) <= 1024:
        raise Refused("mns_bad_signature")
    return signature


def _date(text: str) -> float | None:
    if not text or len(text) > 64:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def _md5_matches(sent: str, body: bytes) -> bool:
    """``Content-MD5`` is the body's: base64 of its hex digest (as MNS sends it) or of the
    digest itself (RFC 1864)."""
    digest = hashlib.md5(body, usedforsecurity=False)
    hexes = digest.hexdigest()
    forms = (hexes.encode(), hexes.upper().encode(), digest.digest())
    wanted = [base64.b64encode(form).decode() for form in forms]
    return bool(sent) and any(hmac.compare_digest(sent, one) for one in wanted)
