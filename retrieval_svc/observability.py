"""Per-request observability: request id, metrics by route template, one JSON log line.

The log line carries the request id, key name, tenant, knowledge ids, counts and timings —
never document content, queries, tokens or keys. Anything below the middleware adds fields
with :func:`log_fields`.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval_svc.log_words import UVICORN
from retrieval_svc.metrics import Metrics
from retrieval_svc.words import again

access_log = logging.getLogger("rsvc.access")

_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_fields: ContextVar[dict[str, Any] | None] = ContextVar("rsvc_request_fields", default=None)
_request: ContextVar[tuple[str, Scope] | None] = ContextVar("rsvc_request", default=None)


def current_request() -> tuple[str | None, str | None]:
    """This request's id and route template (None, None outside a request)."""
    found = _request.get()
    if found is None:
        return None, None
    request_id, scope = found
    return request_id, getattr(scope.get("route"), "path", None)


def log_fields(**fields: Any) -> None:
    """Add fields to this request's log line (no-op outside a request)."""
    current = _fields.get()
    if current is not None:
        current.update(fields)


def request_id_from(scope: Scope) -> str:
    """The caller's X-Request-ID if it is sane, else a new one."""
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate = bytes(value).decode("latin-1")
            if _VALID_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex


class ObservabilityMiddleware:
    """Request id in and out, metrics by route template, and the access log line."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope)
        fields: dict[str, Any] = {}
        token = _fields.set(fields)
        request_token = _request.set((request_id, scope))
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            self.metrics.request_seconds.labels(method=method, route=route).observe(elapsed)
            if route not in ("/healthz", "/readyz", "/metrics"):
                line = {
                    "event": "request",
                    "request_id": request_id,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    **fields,
                }
                access_log.info("request", extra={"fields": line})
            _fields.reset(token)
            _request.reset(request_token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any request fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        else:
            out["message"] = record.getMessage()
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        # orjson: a few µs where json.dumps took tens, on the two lines of every retrieval.
        return orjson.dumps(out, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class UvicornWords(logging.Filter):
    """uvicorn's lines about the server's life ("Started server process [N]", "Uvicorn running
    on …", "Application shutdown complete.") said in the reader's language, their values kept;
    any other line passes as uvicorn wrote it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            english = record.getMessage()
        except Exception:  # (a line that cannot be formatted: the handler says so, as ever)
            return True
        said = again(english, *UVICORN)
        if said != english:
            record.msg, record.args = said, None
            record.__dict__.pop("color_message", None)  # (uvicorn's English, with colours)
        return True


def say_uvicorn_in_words() -> None:
    """Put ``UvicornWords`` on uvicorn's server logger (once)."""
    server = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, UvicornWords) for f in server.filters):
        server.addFilter(UvicornWords())


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for the service and the libraries it logs through."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)  # ours is the access log
    say_uvicorn_in_words()
    logging.getLogger("elastic_transport").setLevel(logging.WARNING)
