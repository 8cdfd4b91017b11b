"""Alibaba Cloud MNS's HTTP push as its documentation describes it, made locally: a signing
key and its X.509 certificate, an HTTPS server that serves the certificate (and misbehaves
on purpose: a redirect, a certificate too large, one dripped slowly), and requests signed as
MNS signs them (RSA-SHA1 over METHOD, Content-MD5, Content-Type, Date, the x-mns-* headers and
the path), carrying an OSS event in MNS's XML notification."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.client
import ipaddress
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate(
    key: rsa.RSAPrivateKey,
    name: str,
    ip: str | None = None,
    *,
    valid: tuple[float, float] = (-86400.0, 30 * 86400.0),
) -> bytes:
    """A self-signed certificate of ``key`` (PEM); with ``ip``, one a TLS server can present
    for that address and a client can trust as its own CA. ``valid``: from and until when,
    in seconds from now."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + datetime.timedelta(seconds=valid[0]))
        .not_valid_after(now + datetime.timedelta(seconds=valid[1]))
    )
    if ip is not None:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))])
        builder = builder.add_extension(san, critical=False).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
    cert = builder.sign(key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class CertServer:
    """An HTTPS server on 127.0.0.1 serving ``pages``; ``asked`` is every path requested."""

    port: int
    ca_file: Path
    pages: dict[str, bytes]
    asked: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "https") -> str:
        return f"{scheme}://{host}:{self.port}{path}"


@contextmanager
def cert_server(work: Path, pages: dict[str, bytes]) -> Iterator[CertServer]:
    """Serves ``pages``, and: ``/redirect`` → 302 to ``/cert.pem``; ``/huge`` 64 KiB without
    a length; ``/slow`` a byte every half second for a minute."""
    tls_key = new_key()
    (work / "tls.pem").write_bytes(certificate(tls_key, "127.0.0.1", ip="127.0.0.1"))
    (work / "tls.key").write_bytes(
        tls_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    served: CertServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.asked.append(self.path)
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", served.url("/cert.pem"))
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/huge":
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"-----BEGIN CERTIFICATE-----\n" + b"A" * 65536)
            elif self.path == "/slow":
                self.send_response(200)
                self.send_header("Content-Length", "120")
                self.end_headers()
                for _ in range(120):
                    self.wfile.write(b"A")
                    self.wfile.flush()
                    time.sleep(0.5)
            elif self.path in served.pages:
                body = served.pages[self.path]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "tls.pem", work / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    served = CertServer(server.server_address[1], work / "tls.pem", pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def oss_event(bucket: str, key: str) -> dict[str, object]:
    """One OSS event as OSS sends it to MNS (its keys as stored)."""
    return {"events": [{
        "eventName": "ObjectCreated:PutObject", "eventSource": "acs:oss",
        "eventTime": datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z"),
        "eventVersion": "1.0", "region": "cn-hangzhou",
        "oss": {"bucket": {"name": bucket}, "object": {"key": key}, "ossSchemaVersion": "1.0"},
    }]}  # fmt: skip


def notification(bucket: str, key: str) -> bytes:
    """MNS's XML notification (its documented fields) carrying the OSS event in base64."""
    message = base64.b64encode(json.dumps(oss_event(bucket, key)).encode()).decode()
    md5 = hashlib.md5(message.encode()).hexdigest().upper()
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<Notification xmlns="http://mns.aliyuncs.com/doc/v1/">'
        "<TopicOwner>1692545896541241</TopicOwner><TopicName>oss-events</TopicName>"
        "<Subscriber>1692545896541241</Subscriber><SubscriptionName>watcher</SubscriptionName>"
        f"<MessageId>{uuid.uuid4().hex.upper()}</MessageId><MessageMD5>{md5}</MessageMD5>"
        f"<Message>{message}</Message><PublishTime>{int(time.time() * 1000)}</PublishTime>"
        "</Notification>"
    ).encode()


def signed(
    body: bytes,
    key: rsa.RSAPrivateKey,
    cert_url: str,
    *,
    path: str = "/notifications",
    when: float | None = None,
) -> dict[str, str]:
    """The headers MNS sends with ``body`` to ``path``, signed by ``key``."""
    headers = {
        "Content-Type": "text/xml;charset=utf-8",
        "Content-MD5": base64.b64encode(hashlib.md5(body).hexdigest().encode()).decode(),
        "Date": formatdate(time.time() if when is None else when, usegmt=True),
        "x-mns-request-id": uuid.uuid4().hex[:24].upper(),
        "x-mns-signing-cert-url": base64.b64encode(cert_url.encode()).decode(),
        "x-mns-version": "2015-06-06",
    }
    mns = "".join(f"{k}:{headers[k]}\n" for k in sorted(h for h in headers if h.startswith("x-")))
    text = "\n".join(["POST", headers["Content-MD5"], headers["Content-Type"], headers["Date"]])
    signature = key.sign(f"{text}\n{mns}{path}".encode(), padding.PKCS1v15(), hashes.SHA1())
    headers["Authorization"] = base64.b64encode(signature).decode()
    return headers


def post(port: int, body: bytes, headers: dict[str, str], path: str = "/notifications") -> int:
    """``body`` POSTed to the listener on 127.0.0.1 as given; the status it answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()
