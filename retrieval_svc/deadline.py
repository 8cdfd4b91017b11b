"""One deadline per request (design.md §4): every call inside a request gets what is left.

``within(seconds)`` runs a request's work under one deadline and cuts it there
(``DeadlineExceeded``); code below asks ``remaining(bound)`` for the time it may spend on one
call (its own bound outside a request), so that no chain of calls, each within its own
timeout, adds up to more than the request was promised.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from retrieval_svc.errors import DeadlineExceeded

_deadline: ContextVar[float | None] = ContextVar("rsvc_request_deadline", default=None)


def remaining(bound: float) -> float:
    """Seconds this call may take: ``bound``, or less when the request's deadline is nearer
    (zero or less once it has passed)."""
    deadline = _deadline.get()
    if deadline is None:
        return bound
    return min(bound, deadline - time.monotonic())


@asynccontextmanager
async def within(seconds: float) -> AsyncIterator[None]:
    """Run the block under one deadline of ``seconds``; past it, ``DeadlineExceeded``.

    A deadline already set by an enclosing block stays in force if it is nearer.
    """
    deadline = time.monotonic() + remaining(seconds)
    token = _deadline.set(deadline)
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + (deadline - time.monotonic())):
            yield
    except TimeoutError as exc:
        raise DeadlineExceeded("the request did not finish within its deadline") from exc
    finally:
        _deadline.reset(token)
