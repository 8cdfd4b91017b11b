"""The console's security headers on every answer under ``/console`` — pages, redirects, the
stylesheet, and the framework's own 404 and 405 — set in one place below the routes."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/console"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    b"content-security-policy": CSP.encode(),
    b"x-frame-options": b"DENY",
    b"referrer-policy": b"no-referrer",
    b"x-content-type-options": b"nosniff",
}


class ConsoleHeaders:
    """ASGI middleware: ``HEADERS`` on every response whose path is under ``/console``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in HEADERS]
                message = {**message, "headers": [*kept, *HEADERS.items()]}
            await send(message)

        await self.app(scope, receive, secured)
