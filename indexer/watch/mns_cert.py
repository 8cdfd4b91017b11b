"""MNS's signing certificate: where it may come from and how it is fetched and read, for
``indexer.watch.mns_signature``.

Whoever can reach the listener chooses the certificate's URL (``x-mns-signing-cert-url``), so
it is fetched only from ``https`` on an allowed host (``DEFAULT_CERT_HOSTS`` — Alibaba Cloud's
documented certificate hosts — or the operator's ``RSVC_WATCH_MNS_CERT_HOSTS``: ``*`` is one DNS
label), port 443 unless the entry names one, no user, query or fragment; never following a
redirect, at most ``CERT_BYTES``, the whole fetch cut off after ``FETCH_DEADLINE_S`` and waited
for a second more, its name's resolving included (a slow server or resolver cannot hold the
listener), TLS verified against the system's CAs or the operator's. What it holds must be an
RSA key of 1,024–8,192 bits in an X.509 certificate; its validity dates are kept with it.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import re
import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

# Alibaba Cloud's: the certificate URL starts with https://mnstest.oss-cn-hangzhou.aliyuncs.com/
# or https://mns-cert.oss-cn-{region}.aliyuncs.com/ (an OSS bucket's name is its own worldwide).
DEFAULT_CERT_HOSTS = ("mnstest.oss-cn-hangzhou.aliyuncs.com", "mns-cert.oss-*.aliyuncs.com")
CERT_BYTES = 16 * 1024  # a certificate is ~1-2 KiB
FETCH_DEADLINE_S = 3.0  # the whole fetch (MNS waits 5 s for its answer)
CERT_SKEW_S = 5 * 60.0  # clock skew allowed around a certificate's validity dates
UNAVAILABLE = "mns_cert_unavailable"  # (503: the sender tries again; the others are 403)

_LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"


@dataclass(frozen=True, slots=True)
class SigningCert:
    """A signing certificate's key and the dates it is valid between (seconds since the
    epoch)."""

    key: rsa.RSAPublicKey
    not_before: float
    not_after: float

    def valid_at(self, now: float) -> bool:
        """Whether ``now`` is within its dates, ``CERT_SKEW_S`` either side."""
        return self.not_before - CERT_SKEW_S <= now <= self.not_after + CERT_SKEW_S


class Refused(Exception):
    """A request refused, with its problem code."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class CertHost:
    """An allowed certificate host: ``HOST`` (port 443) or ``HOST:PORT``, ``*`` one label."""

    pattern: re.Pattern[str]
    port: int

    @classmethod
    def parse(cls, spec: str) -> CertHost:
        host, colon, port = spec.strip().lower().rpartition(":")
        if not colon or not port.isdigit():
            host, port = spec.strip().lower(), "443"
        labels = host.split(".")
        if not host or not all(x == "*" or re.fullmatch(r"[a-z0-9*-]+|\d+", x) for x in labels):
            raise ValueError(f"not a host name: {spec!r}")
        parts = [_LABEL if x == "*" else re.escape(x).replace(r"\*", "[a-z0-9-]*") for x in labels]
        return cls(re.compile(r"\.".join(parts)), int(port))

    def allows(self, host: str, port: int) -> bool:
        return port == self.port and self.pattern.fullmatch(host) is not None


def cert_hosts(spec: str | None) -> tuple[CertHost, ...]:
    """``RSVC_WATCH_MNS_CERT_HOSTS`` (comma-separated), else Alibaba Cloud's hosts."""
    given = [s for s in (spec or "").split(",") if s.strip()] or list(DEFAULT_CERT_HOSTS)
    return tuple(CertHost.parse(s) for s in given)


@dataclass(frozen=True, slots=True)
class CertUrl:
    host: str
    port: int
    path: str

    @property
    def key(self) -> str:
        return f"{self.host}:{self.port}{self.path}"


def cert_url(encoded: str, allowed: Iterable[CertHost]) -> CertUrl:
    """The certificate's address from ``x-mns-signing-cert-url``, when it may be fetched."""
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode("ascii")
        parts = urlsplit(text)
        port = parts.port or 443
        host = (parts.hostname or "").lower()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Refused("mns_cert_refused") from None
    plain = len(text) <= 2048 and text.isprintable() and " " not in text
    if not plain or parts.scheme != "https" or parts.username is not None or parts.password:
        raise Refused("mns_cert_refused")
    if parts.query or parts.fragment or "?" in text or "#" in text or not parts.path:
        raise Refused("mns_cert_refused")
    if not any(one.allows(host, port) for one in allowed):
        raise Refused("mns_cert_refused")
    return CertUrl(host, port, parts.path)


def fetched_within(where: CertUrl, ca_file: str | None) -> bytes:
    """``fetch_cert`` on a thread of its own, waited for ``FETCH_DEADLINE_S`` (and a second):
    a name that resolves slowly (the resolver's timeouts are not the socket's) cannot hold the
    listener either. A thread given up on ends on its own; at most ``FETCHES_PER_MINUTE``."""
    got: list[bytes | Exception] = []

    def fetch() -> None:
        try:
            got.append(fetch_cert(where, ca_file))
        except Exception as exc:
            got.append(exc)

    thread = threading.Thread(target=fetch, name="mns-certificate", daemon=True)
    thread.start()
    thread.join(FETCH_DEADLINE_S + 1.0)
    if not got:
        raise Refused(UNAVAILABLE)
    if isinstance(got[0], Exception):
        raise got[0]
    return got[0]


_connect = socket.create_connection  # (one name, so a test can make it hang)


def fetch_cert(where: CertUrl, ca_file: str | None) -> bytes:
    """The certificate at ``where`` over verified TLS: 200 only (a redirect is not followed),
    at most ``CERT_BYTES``, the whole exchange cut off after ``FETCH_DEADLINE_S``."""
    context = ssl.create_default_context(cafile=ca_file)
    live: list[socket.socket] = []  # (what the deadline shuts: the socket, then its TLS)
    connection = http.client.HTTPConnection(where.host, where.port)
    answer: http.client.HTTPResponse | None = None
    timer = threading.Timer(FETCH_DEADLINE_S, _cut, (live,))
    timer.daemon = True
    try:
        live.append(_connect((where.host, where.port), FETCH_DEADLINE_S))
        timer.start()
        tls = context.wrap_socket(
            live[0], server_hostname=where.host, do_handshake_on_connect=False
        )
        live[0] = tls
        tls.do_handshake()
        connection.sock = tls
        connection.putrequest("GET", where.path, skip_host=True, skip_accept_encoding=True)
        connection.putheader(
            "Host", where.host if where.port == 443 else f"{where.host}:{where.port}"
        )
        connection.putheader("Connection", "close")
        connection.endheaders()
        answer = connection.getresponse()
        length = answer.getheader("Content-Length") or "0"
        if answer.status != 200 or not length.isdigit() or int(length) > CERT_BYTES:
            raise Refused(UNAVAILABLE)
        body = answer.read(CERT_BYTES + 1)
        if len(body) > CERT_BYTES:
            raise Refused(UNAVAILABLE)
        return body
    except (OSError, http.client.HTTPException, ValueError):
        raise Refused(UNAVAILABLE) from None
    finally:
        timer.cancel()
        if answer is not None:  # (a socket whose answer is still open is not closed)
            answer.close()
        connection.close()
        for sock in live:
            sock.close()


def _cut(live: list[socket.socket]) -> None:
    """The fetch's deadline: its socket shut, so whatever call waits on it returns."""
    for sock in live:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


def signing_cert(data: bytes) -> SigningCert:
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            cert = x509.load_pem_x509_certificate(data)
        else:
            cert = x509.load_der_x509_certificate(data)
        key = cert.public_key()
        dates = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    except ValueError:
        raise Refused(UNAVAILABLE) from None
    if not isinstance(key, rsa.RSAPublicKey) or not 1024 <= key.key_size <= 8192:
        raise Refused(UNAVAILABLE)
    return SigningCert(key, *dates)
