"""MNS's signed HTTP push on the watcher's listener (``--listen-mns``), as an attacker who can
reach the port would try it: a delivery signed as Alibaba Cloud documents (by a key whose
certificate a local HTTPS server serves) is heard; a tampered body, another key, a certificate
off the allowed hosts or over http, a stale date and a replay are each refused (403) and named
without the certificate server being asked; a certificate server that redirects, serves too
much or drips is given up on (503) and the listener keeps serving."""

from __future__ import annotations

import base64
import http.client
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from indexer.watch import mns_cert, mns_signature, pushed
from indexer.watch.events import Heard
from indexer.watch.health import Status, WatchMetrics, rejected
from indexer.watch.mns_signature import (
    DEFAULT_CERT_HOSTS,
    MnsVerifier,
    cert_hosts,
    string_to_sign,
)
from indexer.watch.pushed import Listener
from tests.support.mns import (
    CertServer,
    cert_server,
    certificate,
    new_key,
    notification,
    post,
    signed,
)

KEY = new_key()
OTHER_KEY = new_key()


@dataclass
class Setup:
    listener: Listener
    certs: CertServer

    def heard(self) -> list[Heard]:
        found = []
        while not self.listener.inbox.empty():
            found.append(self.listener.inbox.get_nowait())
        return found

    def problems(self) -> list[str]:
        return [r.problem for h in self.heard() for r in h.rejected]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    day = 86400.0
    pages = {
        "/cert.pem": certificate(KEY, "mns-signing"),
        "/other.pem": b"not a certificate",
        "/expired.pem": certificate(KEY, "mns-signing", valid=(-90 * day, -3600.0)),
        "/early.pem": certificate(KEY, "mns-signing", valid=(3600.0, 90 * day)),
        # (out of their dates by two minutes: within the skew allowed)
        "/just-expired.pem": certificate(KEY, "mns-signing", valid=(-90 * day, -120.0)),
        "/just-early.pem": certificate(KEY, "mns-signing", valid=(120.0, 90 * day)),
    }
    with cert_server(tmp_path, pages) as certs:
        verifier = MnsVerifier(cert_hosts(f"127.0.0.1:{certs.port}"), str(certs.ca_file))
        listener = Listener("127.0.0.1:0", "tok-en", "corp", "kb/", mns=verifier)
        listener.serve()
        try:
            yield Setup(listener, certs)
        finally:
            listener.close()


def test_a_delivery_signed_as_mns_signs_is_heard_and_the_certificate_fetched_once(
    setup: Setup,
) -> None:
    url = setup.certs.url("/cert.pem")
    for key in ("kb/合同 2026.md", "kb/b.md"):
        body = notification("corp", key)
        assert post(setup.listener.port, body, signed(body, KEY, url)) == 200
    heard = setup.heard()
    assert [h.keys for h in heard] == [{"合同 2026.md"}, {"b.md"}]
    assert all(h.kind == "pushed" and not h.rejected for h in heard)
    assert setup.certs.asked == ["/cert.pem"]  # (cached)


def test_the_bearer_token_still_works_beside_it(setup: Setup) -> None:
    body = notification("corp", "kb/a.md")
    assert post(setup.listener.port, body, {"Authorization": "Bearer tok-en"}) == 200
    assert post(setup.listener.port, body, {"Authorization": "Bearer nope"}) == 401
    assert [h.keys for h in setup.heard()] == [{"a.md"}]


def test_a_tampered_body_is_refused(setup: Setup) -> None:
    url = setup.certs.url("/cert.pem")
    body, other = notification("corp", "kb/a.md"), notification("corp", "kb/secret.md")
    headers = signed(body, KEY, url)
    assert post(setup.listener.port, other, headers) == 403  # (its MD5 is not the one signed)
    resigned = {**headers, "Content-MD5": signed(other, KEY, url)["Content-MD5"]}
    assert post(setup.listener.port, other, resigned) == 403  # (the MD5 is, the signature not)
    assert setup.problems() == ["mns_bad_signature", "mns_bad_signature"]


def test_another_keys_signature_is_refused(setup: Setup) -> None:
    body = notification("corp", "kb/a.md")
    headers = signed(body, OTHER_KEY, setup.certs.url("/cert.pem"))
    assert post(setup.listener.port, body, headers) == 403
    headers = {**signed(body, KEY, setup.certs.url("/cert.pem")), "Authorization": "x" * 40}
    assert post(setup.listener.port, body, headers) == 403
    assert setup.problems() == ["mns_bad_signature", "mns_bad_signature"]


@pytest.mark.parametrize(
    "where",
    [
        "http://127.0.0.1:{port}/cert.pem",  # (not https)
        "https://localhost:{port}/cert.pem",  # (a host off the list)
        "https://127.0.0.1/cert.pem",  # (another port: 443)
        "https://127.0.0.1:{port}@169.254.169.254/latest/meta-data",  # (user info)
        "https://127.0.0.1:{port}/cert.pem?x=1",
        "file:///etc/passwd",
        "https://127.0.0.1:{port}/cert.pem\nHost: evil",
    ],
)
def test_a_certificate_off_the_allowed_hosts_is_never_fetched(setup: Setup, where: str) -> None:
    body = notification("corp", "kb/a.md")
    headers = signed(body, KEY, where.format(port=setup.certs.port))
    assert post(setup.listener.port, body, headers) == 403
    assert setup.problems() == ["mns_cert_refused"]
    assert setup.certs.asked == []


def test_a_stale_or_future_or_missing_date_is_refused(setup: Setup) -> None:
    import time

    url = setup.certs.url("/cert.pem")
    body = notification("corp", "kb/a.md")
    for when in (time.time() - 16 * 60, time.time() + 16 * 60):
        assert post(setup.listener.port, body, signed(body, KEY, url, when=when)) == 403
    undated = {k: v for k, v in signed(body, KEY, url).items() if k != "Date"}
    assert post(setup.listener.port, body, undated) == 403
    assert setup.problems() == ["mns_stale"] * 3
    assert setup.certs.asked == []


def test_the_same_delivery_sent_again_is_a_replay(setup: Setup) -> None:
    body = notification("corp", "kb/a.md")
    headers = signed(body, KEY, setup.certs.url("/cert.pem"))
    assert post(setup.listener.port, body, headers) == 200
    assert post(setup.listener.port, body, headers) == 403
    assert setup.problems() == ["mns_replayed"]


@pytest.mark.parametrize(
    ("path", "status"),
    [("/expired.pem", 403), ("/early.pem", 403), ("/just-expired.pem", 200),
     ("/just-early.pem", 200)],
)  # fmt: skip
def test_a_certificate_out_of_its_dates_signs_nothing(setup: Setup, path: str, status: int) -> None:
    body = notification("corp", "kb/a.md")
    assert post(setup.listener.port, body, signed(body, KEY, setup.certs.url(path))) == status
    assert setup.problems() == ([] if status == 200 else ["mns_cert_expired"])


def test_a_certificate_that_expires_while_kept_is_fetched_again_and_refused(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time as clock

    url = setup.certs.url("/cert.pem")
    body = notification("corp", "kb/a.md")
    assert post(setup.listener.port, body, signed(body, KEY, url)) == 200
    later = clock.time() + 31 * 86400.0  # (the certificate is valid for 30 days)

    class Later:  # (this host's clock, a month on, stopped there; the request dated then)
        monotonic = staticmethod(clock.monotonic)
        time = staticmethod(lambda: later)

    monkeypatch.setattr(mns_signature, "time", Later)
    body = notification("corp", "kb/b.md")
    assert post(setup.listener.port, body, signed(body, KEY, url, when=later)) == 403
    assert setup.problems() == ["mns_cert_expired"]
    assert setup.certs.asked == ["/cert.pem", "/cert.pem"]  # (not kept past its expiry)


@pytest.mark.parametrize("path", ["/redirect", "/huge", "/slow", "/other.pem", "/missing"])
def test_a_certificate_server_that_misbehaves_is_given_up_on(setup: Setup, path: str) -> None:
    body = notification("corp", "kb/a.md")
    assert post(setup.listener.port, body, signed(body, KEY, setup.certs.url(path))) == 503
    assert setup.problems() == ["mns_cert_unavailable"]
    assert "/cert.pem" not in setup.certs.asked  # (a redirect is not followed)
    good = signed(body, KEY, setup.certs.url("/cert.pem"))
    assert post(setup.listener.port, body, good) == 200  # (the listener still serves)
    assert [h.keys for h in setup.heard()] == [{"a.md"}]


def test_a_certificate_host_that_never_answers_does_not_hold_the_listener(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def never(*_: object) -> socket.socket:  # (as a resolver or a connect that hangs)
        release.wait(120)
        raise OSError("released")

    monkeypatch.setattr(mns_cert, "_connect", never)
    body = notification("corp", "kb/a.md")
    try:
        assert post(setup.listener.port, body, signed(body, KEY, setup.certs.url("/c"))) == 503
    finally:
        release.set()
    assert setup.problems() == ["mns_cert_unavailable"]


def test_a_flood_of_refused_pushes_is_counted_but_does_not_fill_the_log(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pushed, "REFUSALS_WINDOW_S", 3600.0)  # (one window, however slow)
    monkeypatch.setenv("RSVC_LANG", "en")  # (the log lines read below, in any terminal's locale)
    body = notification("corp", "kb/a.md")
    stale = signed(body, KEY, setup.certs.url("/cert.pem"), when=0.0)
    flood = pushed.LOGGED_REFUSALS + 5
    with caplog.at_level(logging.WARNING):
        assert {post(setup.listener.port, body, stale) for _ in range(flood)} == {403}
        unread = [r for h in setup.heard() for r in h.rejected]
        assert [r.quiet for r in unread] == [False] * pushed.LOGGED_REFUSALS + [True] * 5
        status, metrics = Status(), WatchMetrics({"source": "t"})
        rejected(status, metrics, unread)
    assert status.rejected == flood
    counted = metrics.rejected.labels(reason="mns_stale", source="t")._value.get()
    assert counted == flood
    lines = [r.getMessage() for r in caplog.records]
    assert sum("could not be read" in line for line in lines) == pushed.LOGGED_REFUSALS
    assert sum("counted" in line for line in lines) == 1


def test_two_headers_of_one_signed_name_are_refused(setup: Setup) -> None:
    import http.client

    body = notification("corp", "kb/a.md")
    headers = signed(body, KEY, setup.certs.url("/cert.pem"))
    connection = http.client.HTTPConnection("127.0.0.1", setup.listener.port, timeout=60)
    connection.putrequest("POST", "/notifications")
    for name, value in [*headers.items(), ("x-mns-version", "2099-01-01")]:
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    assert connection.getresponse().status == 403
    connection.close()
    assert setup.problems() == ["mns_bad_signature"]


def test_without_listen_mns_a_signed_delivery_needs_the_token(tmp_path: Path) -> None:
    listener = Listener("127.0.0.1:0", "tok-en", "corp", "kb/")
    listener.serve()
    try:
        body = notification("corp", "kb/a.md")
        headers = signed(body, KEY, "https://mnstest.oss-cn-hangzhou.aliyuncs.com/x.pem")
        assert post(listener.port, body, headers) == 401
        assert listener.inbox.empty()
    finally:
        listener.close()


def test_the_string_to_sign_is_alibabas_documented_example() -> None:
    url = base64.b64encode(b"http://mnstest.oss-cn-hangzhou.aliyuncs.com/x509.pem").decode()
    headers = {
        "content-md5": "ZDgxNjY5ZjFlMDQ5MGM0YWMwMWE5ODlmZDVlYmQxYjI=",
        "content-type": "text/xml;charset=utf-8",
        "date": "Wed, 25 May 2016 10:46:14 GMT",
        "x-mns-version": "2015-06-06",
        "x-mns-signing-cert-url": url,
        "x-mns-request-id": "57458276F0E3D56D7C00XXXX",
        "host": "example.com",
    }
    assert string_to_sign("POST", "/notifications", headers).decode() == (
        "POST\nZDgxNjY5ZjFlMDQ5MGM0YWMwMWE5ODlmZDVlYmQxYjI=\ntext/xml;charset=utf-8\n"
        "Wed, 25 May 2016 10:46:14 GMT\nx-mns-request-id:57458276F0E3D56D7C00XXXX\n"
        f"x-mns-signing-cert-url:{url}\nx-mns-version:2015-06-06\n/notifications"
    )


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [
        ("mnstest.oss-cn-hangzhou.aliyuncs.com", 443, True),
        ("mns-cert.oss-cn-shanghai.aliyuncs.com", 443, True),
        ("mns-cert.oss-ap-southeast-1.aliyuncs.com", 443, True),
        ("mns-cert.oss-cn-shanghai.aliyuncs.com", 8443, False),
        ("mnstest.oss-cn-hangzhou.aliyuncs.com.evil.example", 443, False),
        ("evil.mnstest.oss-cn-hangzhou.aliyuncs.com", 443, False),
        ("mns-cert.oss-cn-x.evil.aliyuncs.com", 443, False),
        ("other.oss-cn-shanghai.aliyuncs.com", 443, False),
        ("169.254.169.254", 443, False),
    ],
)
def test_alibabas_certificate_hosts_by_default(host: str, port: int, allowed: bool) -> None:
    assert any(one.allows(host, port) for one in cert_hosts(None)) is allowed
    assert len(cert_hosts("")) == len(DEFAULT_CERT_HOSTS)


def test_a_sender_that_spends_the_fetch_budget_spends_only_its_own(setup: Setup) -> None:
    """Whoever reaches the port can ask for certificates that are not there (an allowed host,
    any path: no key needed) until the fetch budget is spent; then MNS's own first delivery,
    from another address, must still have its certificate fetched and be heard."""
    junk = notification("corp", "kb/x.md")

    def post_from(source: str, body: bytes, headers: dict[str, str]) -> int:
        connection = http.client.HTTPConnection(
            "127.0.0.1", setup.listener.port, timeout=60, source_address=(source, 0)
        )
        try:
            connection.request("POST", "/notifications", body=body, headers=headers)
            return connection.getresponse().status
        finally:
            connection.close()

    for i in range(mns_signature.FETCHES_PER_MINUTE + 2):
        missing = setup.certs.url(f"/missing-{i}.pem")
        assert post_from("127.0.0.2", junk, signed(junk, OTHER_KEY, missing)) == 503
    assert len(setup.certs.asked) == mns_signature.FETCHES_PER_MINUTE  # (its budget, spent)
    body = notification("corp", "kb/a.md")
    assert post_from("127.0.0.1", body, signed(body, KEY, setup.certs.url("/cert.pem"))) == 200
    assert setup.certs.asked[-1] == "/cert.pem"
    assert [h.keys for h in setup.heard() if h.keys] == [{"a.md"}]


@pytest.mark.parametrize(
    ("sender", "whose"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::9", "2001:db8:1:2::/64"),  # (one host holds the /64)
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("", ""),
    ],
)
def test_a_senders_budget_is_its_address_or_its_ipv6_64(sender: str, whose: str) -> None:
    assert mns_signature.sender_of(sender) == whose
