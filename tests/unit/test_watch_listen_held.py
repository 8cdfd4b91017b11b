"""The listener for pushed events as an attacker without a key would hold it: one sender that
opens connections and never finishes them (a signed-looking request whose body drips, or
headers that never end) takes at most ``MAX_PER_SENDER`` of the listener's connections, so
another sender's delivery is still read and answered."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from indexer.watch import pushed
from indexer.watch.mns_signature import MnsVerifier, cert_hosts
from indexer.watch.pushed import Listener

EVENT = json.dumps({"Records": [{"eventTime": "2026-12-04T09:00:00Z", "s3": {
    "bucket": {"name": "corp"}, "object": {"key": "kb/a.md"}}}]}).encode()  # fmt: skip
# What the attacker sends and never finishes: a request that looks signed (no key is needed to
# say so) whose body is 100 bytes, of which it sends two; or headers without their end.
DRIPS = {
    "body": b"POST /n HTTP/1.1\r\nHost: w\r\nx-mns-signing-cert-url: aGk=\r\n"
    b"Content-Length: 100\r\n\r\nab",
    "headers": b"POST /n HTTP/1.1\r\nHost: w\r\nx-mns-date: ",
}


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    # (the held connections must outlast the test however slow the machine: no sender's
    # silence is cut off while it runs)
    monkeypatch.setattr(pushed, "READ_TIMEOUT_S", 600.0)
    verifier = MnsVerifier(cert_hosts("127.0.0.1:1"))
    served = Listener("127.0.0.1:0", "tok-en", "corp", "kb/", mns=verifier)
    served.serve()
    yield served
    served.close()


def refused_at_once(sock: socket.socket) -> bool:
    """Whether the listener answered (503) or closed this connection instead of reading on."""
    sock.settimeout(0.5)  # (a connection being read gives nothing back: it is held)
    try:
        sock.recv(64)  # (an answer, or b"": closed)
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.mark.parametrize("drip", sorted(DRIPS))
def test_one_sender_cannot_hold_every_connection(listener: Listener, drip: str) -> None:
    held: list[socket.socket] = []
    try:
        for _ in range(pushed.MAX_REQUESTS + 8):  # (held until the listener refuses one)
            sock = socket.create_connection(("127.0.0.1", listener.port), 30, ("127.0.0.2", 0))
            held.append(sock)
            sock.sendall(DRIPS[drip])
            if refused_at_once(sock):
                break
        with socket.create_connection(("127.0.0.1", listener.port), 60) as other:
            other.sendall(b"POST /n HTTP/1.1\r\nHost: w\r\nAuthorization: Bearer tok-en\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(EVENT), EVENT))  # fmt: skip
            assert other.recv(64).startswith(b"HTTP/1.1 200 "), "another sender was refused"
    finally:
        for sock in held:
            sock.close()
    assert listener.inbox.get_nowait().keys == {"a.md"}
    assert len(held) <= pushed.MAX_PER_SENDER + 1, len(held)


@pytest.mark.parametrize("drip", sorted(DRIPS))
def test_a_sender_that_hangs_up_mid_request_writes_nothing(
    listener: Listener, drip: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """A connection reset while its request is read is dropped: no traceback on the watcher's
    output (one a reset, as http.server's default prints, would be a flood nobody counts)."""
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", listener.port), 30, ("127.0.0.2", 0))
        sock.sendall(DRIPS[drip])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # (a reset, not a goodbye)
    deadline = time.monotonic() + 120
    while listener.connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listener.connections == 0
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out and "Exception occurred" not in err + out, err


@pytest.mark.parametrize("length", [b"\xb2", b"1" * 5000, b"-1", b"0x10", "١٢".encode()])
def test_a_length_that_is_not_ascii_digits_is_411_and_writes_nothing(
    listener: Listener, length: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    """'²' is a digit to str.isdigit but not to int(), nor are 5,000 digits: each raised in
    the handler, dropped the connection unanswered and printed a traceback (no key needed)."""
    with socket.create_connection(("127.0.0.1", listener.port), 60) as sock:
        sock.sendall(DRIPS["body"].split(b"Content-Length")[0] + b"Content-Length: " + length
                     + b"\r\n\r\n")  # fmt: skip
        assert sock.recv(64).startswith(b"HTTP/1.1 411 ")
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out, err


def test_a_sender_that_drips_its_headers_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read's timeout alone let a header line dripped a byte at a time hold its connection
    for ever (64 such senders held every connection): the request line and headers are read
    within ``READ_TIMEOUT_S`` in all."""
    monkeypatch.setattr(pushed, "READ_TIMEOUT_S", 1.0)
    served = Listener("127.0.0.1:0", "tok-en", "corp", "kb/")
    served.serve()
    try:
        with socket.create_connection(("127.0.0.1", served.port), 30) as sock:
            sock.sendall(b"POST /n HTTP/1.1\r\nHost: w\r\nx-drip: ")
            cut, until = False, time.monotonic() + 60  # (a byte each 0.2 s: never 1 s silent)
            while not cut and time.monotonic() < until:
                try:
                    sock.sendall(b"x")
                    cut = refused_at_once_within(sock, 0.2)
                except OSError:
                    cut = True
        assert cut, "a sender dripping its headers was never cut off"
    finally:
        served.close()


def refused_at_once_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(64) == b""  # (closed)
    except TimeoutError:
        return False


def test_headers_past_the_limit_are_431_before_anyone_is_authenticated(
    listener: Listener,
) -> None:
    """http.server alone reads 100 header lines of 64 KiB each: 64 connections held so took
    400 MB of the watcher's memory, no key needed."""
    line = b"x-mns-pad: " + b"A" * 20_000 + b"\r\n"
    with socket.create_connection(("127.0.0.1", listener.port), 60) as sock:
        sock.sendall(b"POST /n HTTP/1.1\r\nHost: w\r\n" + line * 3)
        assert sock.recv(64).startswith(b"HTTP/1.1 431 ")
    assert listener.inbox.empty()


def test_a_length_beside_transfer_encoding_is_411(listener: Listener) -> None:
    """Which of the two frames the body? A proxy in front may read the other: refused."""
    with socket.create_connection(("127.0.0.1", listener.port), 60) as sock:
        sock.sendall(b"POST /n HTTP/1.1\r\nHost: w\r\nAuthorization: Bearer tok-en\r\n"
                     b"Transfer-Encoding: chunked\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(EVENT), EVENT))  # fmt: skip
        assert sock.recv(64).startswith(b"HTTP/1.1 411 ")
    assert listener.inbox.empty()


def test_one_ipv6_64_is_one_sender(listener: Listener) -> None:
    """One host holds a whole IPv6 /64: its addresses share one sender's connections."""
    server = listener._server
    taken = [server.admit(f"2001:db8:1:2::{i:x}") for i in range(pushed.MAX_PER_SENDER)]
    assert taken == ["2001:db8:1:2::/64"] * pushed.MAX_PER_SENDER
    assert server.admit("2001:db8:1:2:ffff::1") is None
    assert server.admit("2001:db8:1:3::1") == "2001:db8:1:3::/64"
    assert server.admit("203.0.113.7") == "203.0.113.7"
    for sender in [*taken, "2001:db8:1:3::/64", "203.0.113.7"]:
        server.closed(sender)
    assert listener.connections == 0
