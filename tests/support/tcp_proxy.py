"""A loopback TCP proxy the tests can cut and restore, to make Elasticsearch unreachable
(and reachable again) for one app without stopping the cluster the whole suite shares."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from urllib.parse import urlparse

from tests.support.fake_provider import free_port


class TcpProxy:
    """127.0.0.1:<port> → target; ``cut()`` refuses and drops connections, ``restore()``
    accepts again on the same port. ``delay_s`` holds every response back (a slow cluster).
    ``watch``, when given, sees every piece a client sends before it goes on; when it returns
    False the piece is held back and that connection dropped (a process killed mid-request)."""

    def __init__(self, target_url: str, watch: Callable[[bytes], bool] | None = None) -> None:
        target = urlparse(target_url)
        self.target = (target.hostname or "127.0.0.1", target.port or 80)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.delay_s = 0.0
        self.watch = watch
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _run(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=5)  # type: ignore[arg-type]

    def restore(self) -> None:
        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

        self._run(start())

    def cut(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
                self._server = None
            for writer in list(self._writers):
                writer.close()

        self._run(stop())

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                if not delay and self.watch is not None and not self.watch(data):
                    break
                if delay and self.delay_s:
                    await asyncio.sleep(self.delay_s)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers.update((client_w, upstream_w))
        try:
            await asyncio.gather(
                self._pipe(client_r, upstream_w, False), self._pipe(upstream_r, client_w, True)
            )
        finally:
            self._writers.difference_update((client_w, upstream_w))


def killed_at_bulk(cli: list[str], env: dict[str, str], es_url: str, nth: int) -> None:
    """Run ``cli`` with Elasticsearch behind a proxy that SIGKILLs it as its ``nth`` bulk
    request starts (that request never arrives): a process killed between two bulk writes."""
    import signal
    import subprocess

    child: subprocess.Popen[bytes] | None = None
    bulks = 0

    def watch(data: bytes) -> bool:
        nonlocal bulks
        if b"/_bulk" in data.split(b"\r\n", 1)[0]:  # (a request line)
            bulks += 1
            if bulks == nth and child is not None:
                child.send_signal(signal.SIGKILL)
                return False
        return True

    with TcpProxy(es_url, watch=watch) as proxy:
        child = subprocess.Popen(
            cli,
            env={**env, "RSVC_ES_URL": proxy.url},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, err = child.communicate(timeout=900)
    assert child.returncode == -signal.SIGKILL, f"not killed at bulk {nth}: {err[-2000:]!r}"
