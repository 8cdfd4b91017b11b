"""Bucket events pushed to the watcher over HTTP (``watch --listen ADDR``): MinIO's webhook
target, Alibaba Cloud EventBridge's HTTP target (OSS's events), MNS's HTTP push
(``--listen-mns``), or anything that POSTs the formats ``indexer.watch.notices`` reads.

Every request must carry ``Authorization: Bearer TOKEN`` (MinIO's webhook sends its
``auth_token`` so), compared in constant time; the token is read from a file or the
environment and never logged. With ``--listen-mns`` a request carrying
``x-mns-signing-cert-url`` is taken instead when MNS signed it (``indexer.watch.mns_signature``:
a topic's HTTP push cannot send a token); one that does not verify is 403 (503 while the
signing certificate cannot be fetched: MNS tries again) and named like an unreadable message.

A body is read only when its declared length is within the limits; a request that cannot be
read is answered 4xx and named like an unreadable queue message, and never stops the listener.
A delivery is answered once it is queued in memory: what a dying watcher had not settled, the
re-listing finds.

``http.server`` on a thread, as the watcher's /metrics: the listener needs one POST route and
no framework, and a server that runs beside the watch loop must not take its signals (as
uvicorn's ``serve`` does).
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import http.client
import logging
import queue
import re
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from indexer.watch.events import Heard, Rejected
from indexer.watch.mns_signature import UNAVAILABLE, MnsVerifier, sender_of
from indexer.watch.notices import LIMITS, Limits, read_message
from retrieval_svc.words import say

log = logging.getLogger(__name__)

MAX_REQUESTS = 16  # requests read at once; more are answered 503 (the sender tries again)
# Connections open at once: from one sender address, and in all. One more is answered 503 and
# closed unread, so a sender that opens connections and never finishes them (no key is needed
# to look signed) holds at most its share, never every slot or thread.
MAX_PER_SENDER = MAX_REQUESTS // 2
MAX_CONNECTIONS = 4 * MAX_REQUESTS
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# Requests refused before anyone was authenticated (MNS's signature) get a log line each up to
# this many a window; the rest are counted (the metric, the status record) and one line says so.
LOGGED_REFUSALS = 20
REFUSALS_WINDOW_S = 60.0
LENGTH = re.compile(r"[0-9]{1,15}")  # a Content-Length read (ASCII digits, within reason)
# A sender silent this long, or whose request line and headers, or whose body, take longer, is
# cut off: each read's timeout alone lets a sender that drips a byte at a time hold a
# connection for ever.
READ_TIMEOUT_S = 10.0
# The header lines of one request, in all (http.server alone takes 100 lines of 64 KiB: 64
# connections held so came to 400 MB before anyone was authenticated). MNS sends ~1 KiB.
HEADER_BYTES = 32 * 1024


def parse_address(spec: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every interface) or ``PORT`` as a bound address."""
    host, _, port = spec.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {spec!r}: give HOST:PORT, :PORT or PORT (e.g. :9465)")
    return host, int(port)


class _HeaderBudget:
    """A connection's reader that, while ``budget`` is set, gives the header lines at most that
    many bytes in all (``http.client.LineTooLong`` past it: the handler answers 431)."""

    def __init__(self, raw: Any) -> None:
        self.raw: Any = raw
        self.budget: int | None = None

    def readline(self, size: int = -1) -> bytes:
        if self.budget is None:
            return bytes(self.raw.readline(size))
        if self.budget <= 0:
            raise http.client.LineTooLong("headers")
        line = bytes(self.raw.readline(self.budget + 1 if size < 0 else min(size, self.budget + 1)))
        self.budget -= len(line)
        if self.budget < 0:
            raise http.client.LineTooLong("headers")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class Listener:
    """An HTTP server bound at construction (a taken port fails at the start, not later),
    serving once ``events`` is iterated."""

    def __init__(
        self,
        address: str,
        token: str,
        bucket: str,
        prefix: str,
        limits: Limits = LIMITS,
        mns: MnsVerifier | None = None,
    ) -> None:
        if not token and mns is None:
            raise ValueError("--listen needs a token")
        self.token, self.mns = token.encode(), mns
        self.bucket, self.prefix, self.limits = bucket, prefix, limits
        self.inbox: queue.SimpleQueue[Heard] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._slots = threading.BoundedSemaphore(MAX_REQUESTS)
        self._refusals = threading.Lock()
        self._window_ends, self._logged = 0.0, 0
        self._server = _Server(parse_address(address), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def connections(self) -> int:
        """Connections open now (each read on a thread of its own)."""
        return self._server.connections

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def allowed(self, header: str | None) -> bool:
        """Whether ``Authorization`` carries the token (constant time, whatever it holds)."""
        scheme, _, given = (header or "").partition(" ")
        same = hmac.compare_digest(given.strip().encode("utf-8", "replace"), self.token)
        return same and scheme.lower() == "bearer" and bool(self.token)

    def take(self, body: bytes, sender: str) -> bool:
        """One delivery's keys (and problems) queued for the watcher; whether it was readable."""
        read = read_message(body, self.bucket, self.prefix, self.limits)
        heard = Heard(keys=read.keys, at=read.earliest or time.time(), kind="pushed")
        self._queue(heard, [Rejected(problem, sender) for problem in read.problems])
        return bool(read.keys) or not read.problems

    def refused(self, problem: str, sender: str) -> None:
        """A request refused before its sender was known, named: logged up to
        ``LOGGED_REFUSALS`` a window, then only counted (a flood cannot fill the log)."""
        with self._refusals:
            now = time.monotonic()
            if now >= self._window_ends:
                self._window_ends, self._logged = now + REFUSALS_WINDOW_S, 0
            self._logged += 1
            logged = self._logged
        if logged == LOGGED_REFUSALS + 1:
            log.warning("%s", say("event_refusals_quiet", n=LOGGED_REFUSALS,
                                  seconds=int(REFUSALS_WINDOW_S)))  # fmt: skip
        quiet = logged > LOGGED_REFUSALS
        self._queue(Heard(kind="pushed"), [Rejected(problem, sender, quiet)])

    def _queue(self, heard: Heard, rejected: list[Rejected]) -> None:
        heard.rejected = rejected
        if heard.keys or heard.rejected:
            self.inbox.put(heard)
            if self._loop is not None and self._wake is not None:
                self._loop.call_soon_threadsafe(self._wake.set)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        listener = self

        class Handler(BaseHTTPRequestHandler):
            timeout = READ_TIMEOUT_S
            protocol_version = "HTTP/1.1"
            _deadline: threading.Timer | None = None

            def setup(self) -> None:
                super().setup()
                self._headers_read = _HeaderBudget(self.rfile)
                self.rfile = self._headers_read  # type: ignore[assignment]

            def handle_one_request(self) -> None:
                """One request, its line and headers read within ``READ_TIMEOUT_S`` in all
                (the socket shut then); the body has a deadline of its own."""
                self._deadline = threading.Timer(READ_TIMEOUT_S, self._cut)
                self._deadline.daemon = True
                self._deadline.start()
                try:
                    super().handle_one_request()
                finally:
                    self._deadline.cancel()

            def _cut(self) -> None:
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def parse_request(self) -> bool:
                self._headers_read.budget = HEADER_BYTES
                try:
                    return super().parse_request()
                finally:
                    self._headers_read.budget = None
                    if self._deadline is not None:  # (the headers are read)
                        self._deadline.cancel()

            def do_POST(self) -> None:
                if not listener._slots.acquire(blocking=False):
                    return self._answer(503)
                try:
                    self._post()
                finally:
                    listener._slots.release()

            def _post(self) -> None:
                signed = listener.mns is not None and "x-mns-signing-cert-url" in self.headers
                if not signed and not listener.allowed(self.headers.get("Authorization")):
                    return self._answer(401)
                length = self.headers.get("Content-Length", "")
                if not LENGTH.fullmatch(length):  # (not '²', nor 5,000 digits: int() raises)
                    return self._answer(411)
                if "Transfer-Encoding" in self.headers:  # (beside a length: which one frames
                    return self._answer(411)  # the body? a proxy in front may read the other)
                sender = self.client_address[0]
                if int(length) > listener.limits.body_bytes:
                    if signed:  # (not yet known to be MNS's)
                        listener.refused("too_large", sender)
                    else:
                        listener._queue(Heard(kind="pushed"), [Rejected("too_large", sender)])
                    return self._answer(413)
                body = self._body(int(length))
                if body is None:  # (cut off: too slow, or gone)
                    return self._answer(408)
                if signed and (refused := self._unsigned(body)):
                    listener.refused(refused, sender)
                    return self._answer(503 if refused == UNAVAILABLE else 403)
                self._answer(200 if listener.take(body, sender) else 400)

            def _body(self, length: int) -> bytes | None:
                """The body, read within ``READ_TIMEOUT_S`` in all (not each read's)."""
                deadline, parts, left = time.monotonic() + READ_TIMEOUT_S, [], length
                try:
                    while left > 0:
                        if (remaining := deadline - time.monotonic()) <= 0:
                            return None
                        self.connection.settimeout(remaining)
                        if not (part := self.rfile.read1(min(left, 64 * 1024))):
                            return None
                        parts.append(part)
                        left -= len(part)
                except OSError:
                    return None
                finally:
                    self.connection.settimeout(READ_TIMEOUT_S)
                return b"".join(parts)

            def _unsigned(self, body: bytes) -> str:
                """Why MNS did not sign this request (``""``: it did)."""
                assert listener.mns is not None
                headers = list(self.headers.items())
                sender = str(self.client_address[0])
                return listener.mns.problem(self.command, self.path, headers, body, sender)

            def do_GET(self) -> None:
                self._answer(405)

            do_PUT = do_DELETE = do_PATCH = do_GET

            def _answer(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                if status >= 400:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()

            def log_message(self, *_: object) -> None:  # (a sender's lines stay out of logs)
                pass

        return Handler

    def serve(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
            self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()

    async def events(self, stop: asyncio.Event) -> AsyncIterator[Heard]:
        """What was pushed, gathered into one ``Heard`` per wake-up."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        if not self.inbox.empty():  # (pushed before the watcher began to listen)
            self._wake.set()
        self.serve()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                woken = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({woken, stopping}, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                self._wake.clear()
                heard = Heard(at=time.time(), kind="pushed")
                while not self.inbox.empty():
                    one = self.inbox.get_nowait()
                    heard.keys |= one.keys
                    heard.at = min(heard.at, one.at)
                    heard.rejected += one.rejected
                if heard.keys or heard.rejected:
                    yield heard
        finally:
            stopping.cancel()


class _Server(ThreadingHTTPServer):
    """A thread a connection, at most ``MAX_PER_SENDER`` a sender (an IPv4 address, an IPv6
    /64: one host holds a whole /64) and ``MAX_CONNECTIONS`` in all; a connection that breaks
    off is dropped without a word (a sender cannot write tracebacks into the watcher's output
    by hanging up)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._open: collections.Counter[str] = collections.Counter()
        self._counting = threading.Lock()
        super().__init__(address, handler)

    def admit(self, address: str) -> str | None:
        """The sender ``address`` counts as, now holding one more connection; ``None``: full."""
        sender = sender_of(address)
        with self._counting:
            if self._open[sender] >= MAX_PER_SENDER or self._open.total() >= MAX_CONNECTIONS:
                return None
            self._open[sender] += 1
        return sender

    def process_request(self, request: Any, client_address: Any) -> None:
        sender = self.admit(str(client_address[0]))
        if sender is None:
            try:
                request.setblocking(False)
                request.send(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.closed(sender)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.closed(sender_of(str(client_address[0])))

    def closed(self, sender: str) -> None:
        with self._counting:
            self._open[sender] -= 1
            if self._open[sender] <= 0:
                del self._open[sender]

    @property
    def connections(self) -> int:
        with self._counting:
            return self._open.total()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # (a bug here still says so)
            super().handle_error(request, client_address)


def token_from(path: str | None, environ: dict[str, Any]) -> str:
    """The listener's token: the file's first line, else ``RSVC_WATCH_LISTEN_TOKEN``."""
    if path:
        with open(path, encoding="utf-8") as file:
            return file.readline().strip()
    return str(environ.get("RSVC_WATCH_LISTEN_TOKEN") or "").strip()
