"""An MCP client from the official SDK, against the app in-process or a live server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

# The in-process app is reached as the service binds by default (a loopback Host: the SDK's
# DNS-rebinding protection is on there).
BASE = "http://127.0.0.1:8080"


@asynccontextmanager
async def mcp_session(
    target: FastAPI | str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialised ``ClientSession`` on ``target``: an app (run in-process, its lifespan
    included) or a live server's base URL."""
    async with (
        LifespanManager(target) if isinstance(target, FastAPI) else _nothing(),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=target) if isinstance(target, FastAPI) else None,
            headers=headers or {},
            timeout=60,
        ) as http,
        streamable_http_client(
            f"{BASE if isinstance(target, FastAPI) else target}/mcp", http_client=http
        ) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def rpc(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    """A JSON-RPC request body."""
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


MCP_HEADERS = {
    "Host": "127.0.0.1:8080",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
