"""A kept-alive connection outlives the idle gaps of the clients that reuse it (RSVC_KEEP_ALIVE_S).

uvicorn closes an idle connection after 5 s by default; a client or proxy that keeps it
longer (Dify's HTTP client, a load balancer's 60 s) then sends a request just as the service
closes it, and that request fails. The benchmark hit exactly this between two rounds.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from retrieval_svc.auth.keys import hash_key
from tests.support import KEYS
from tests.support.live import live_service, serve_env

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n"


def answer(conn: socket.socket) -> bytes:
    """One HTTP response off ``conn`` (headers and the small body), or b'' if it was closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = conn.recv(4096)
        if not part:
            return data
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(4096)
    return head


def keys_file(tmp_path: Path) -> Path:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps([{"name": "anon", "sha256": hash_key(KEYS["anon"]), "tenant": "acme"}])
    )
    return keys


def test_an_idle_connection_is_still_open_after_uvicorns_five_seconds(
    corpus: str, tmp_path: Path
) -> None:
    with live_service(serve_env(corpus, keys_file(tmp_path)), tmp_path) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(REQUEST)
            assert answer(conn).startswith(b"HTTP/1.1 200")
            time.sleep(7)  # idle past uvicorn's default keep-alive
            conn.sendall(REQUEST)
            assert answer(conn).startswith(b"HTTP/1.1 200")


def test_the_service_closes_an_idle_connection_after_the_setting(
    corpus: str, tmp_path: Path
) -> None:
    env = serve_env(corpus, keys_file(tmp_path), RSVC_KEEP_ALIVE_S="1")
    with live_service(env, tmp_path) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            conn.sendall(REQUEST)
            assert answer(conn).startswith(b"HTTP/1.1 200")
            assert conn.recv(4096) == b""  # closed by the service once idle for a second
