"""Request hygiene at the ASGI edge, before routing: the path's form and the body's size."""

from __future__ import annotations

import logging
import re

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval_svc.errors import INTERNAL_ERROR_BODY

log = logging.getLogger(__name__)
_SLASHES = re.compile(r"/{2,}")


class CollapseSlashesMiddleware:
    """``//retrieval`` is ``/retrieval``: Dify joins an endpoint registered with a trailing
    slash and its ``/retrieval`` into a double slash, and would otherwise get a 404."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "//" in scope["path"]:
            path = _SLASHES.sub("/", scope["path"])
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)


class NoStoreMiddleware:
    """``Cache-Control: no-store`` on every answer: they carry permission-filtered content (or
    errors about it), which no shared cache or browser may keep and hand to someone else."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"
                ]
                headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_no_store)


class BodyLimitMiddleware:
    """413 in the service's error shape for bodies over ``max_bytes``.

    A declared ``Content-Length`` is checked up front; a body without one (chunked) is read
    up to the limit and replayed to the application, so nothing oversized reaches parsing.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = {
            "error_code": 3001,  # an invalid request body, in the documented table (HTTP 413)
            "error_msg": f"request body larger than {self.max_bytes} bytes",
            "path": "body",
        }
        await JSONResponse(body, status_code=413)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.max_bytes + 1
                if declared > self.max_bytes:
                    await self._too_large(scope, receive, send)
                    return
                await self.app(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


class InternalErrorMiddleware:
    """An unexpected exception (a bug) becomes 500 / 5000 "internal error", logged with the
    request id, and goes no further: Starlette's own handler re-raises it after answering,
    and the server then drops the keep-alive connection, so the caller's next request on it
    would fail too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            log.exception("unhandled error: %s", type(exc).__name__)
            if started:  # half an answer is out: only closing the connection can end it
                raise
            answer = Response(INTERNAL_ERROR_BODY, 500, media_type="application/json")
            await answer(scope, receive, send)
