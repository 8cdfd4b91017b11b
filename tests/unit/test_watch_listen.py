"""The listener for pushed events (``indexer.watch.pushed``) on loopback: only a request with
the bearer token is read, within the queue's limits; what it names is queued for the watcher,
what it cannot read is named (4xx), and the address is parsed as documented."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from indexer.watch.notices import Limits
from indexer.watch.pushed import Listener, parse_address


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener("127.0.0.1:0", "tok-en", "corp", "kb/", Limits(body_bytes=4096))
    served.serve()
    yield served
    served.close()


def post(listener: Listener, body: bytes, authorization: str | None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{listener.port}/", data=body, method="POST")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


EVENT = json.dumps({"Records": [{"eventTime": "2026-12-04T09:00:00Z", "s3": {
    "bucket": {"name": "corp"}, "object": {"key": "kb/a%20b.md"}}}]}).encode()  # fmt: skip


@pytest.mark.parametrize(
    "authorization", [None, "", "Bearer", "Bearer tok", "Bearer tok-en2", "Basic tok-en", "tok-en"]
)
def test_without_the_token_nothing_is_read(listener: Listener, authorization: str | None) -> None:
    assert post(listener, EVENT, authorization) == 401
    assert listener.inbox.empty()


def test_with_the_token_events_are_queued_and_bad_bodies_named(listener: Listener) -> None:
    assert post(listener, EVENT, "Bearer tok-en") == 200
    assert post(listener, EVENT, "bearer  tok-en") == 200
    assert post(listener, b'{"Records":[{"s3":"x"}]}', "Bearer tok-en") == 400
    assert post(listener, b"x" * 5000, "Bearer tok-en") == 413
    heard = [listener.inbox.get_nowait() for _ in range(4)]
    assert [h.keys for h in heard] == [{"a b.md"}, {"a b.md"}, set(), set()]
    assert [[r.problem for r in h.rejected] for h in heard] == [
        [], [], ["bad_record"], ["too_large"]]  # fmt: skip
    assert all(h.kind == "pushed" for h in heard)


@pytest.mark.parametrize(
    ("spec", "address"),
    [(":9465", ("0.0.0.0", 9465)), ("9465", ("0.0.0.0", 9465)),
     ("127.0.0.1:80", ("127.0.0.1", 80)), ("[::1]:9465", ("::1", 9465))],
)  # fmt: skip
def test_an_address_is_host_and_port(spec: str, address: tuple[str, int]) -> None:
    assert parse_address(spec) == address


@pytest.mark.parametrize("spec", ["", "host:", "host:port", ":70000"])
def test_a_bad_address_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address(spec)
