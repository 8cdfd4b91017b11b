"""What Elasticsearch's failures mean for a caller, and saying once that the cluster is away.

Translated where they are raised (``ElasticCalls._call``): overload is a 503 with
``Retry-After``, another failure of the cluster a 503, a value the index cannot take a 400.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from retrieval_svc.errors import QueryRefused, SearchUnavailable
from retrieval_svc.words import say

log = logging.getLogger(__name__)


class Reachability:
    """One log line when Elasticsearch becomes unreachable and one when it is back, with how
    long and how many calls failed, instead of a line (and a traceback) per failed call."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.failures = 0

    def failed(self, cause: str) -> None:
        """A call could not reach Elasticsearch."""
        self.failures += 1
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning(say("log_es_down", why=cause))

    def reached(self) -> None:
        """A call reached Elasticsearch."""
        if self.down_since is not None:
            seconds = f"{time.monotonic() - self.down_since:.1f}"
            log.warning(say("log_es_back", seconds=seconds, n=self.failures))
            self.down_since, self.failures = None, 0


# A shard may shed load: Elasticsearch's circuit breakers and full queues, and their answers.
_OVERLOAD = ("circuit_breaking_exception", "es_rejected_execution_exception")
RETRY_AFTER_S = 1


def refusal(status: int, error: Any) -> SearchUnavailable | QueryRefused:
    """The service error for Elasticsearch's answer ``status`` with body ``error``.

    Overload (429, a tripped circuit breaker, a full queue) is a 503 the caller may retry
    after ``Retry-After``; another failure of the cluster a 503; a 4xx means the request held
    a value the index cannot take: a 400 (logged with Elasticsearch's reason, never a 500).
    """
    kind, reason = _reason(error)
    if status == 429 or kind in _OVERLOAD or any(k in reason for k in _OVERLOAD):
        return SearchUnavailable(
            "Elasticsearch is overloaded; retry shortly", retry_after_s=RETRY_AFTER_S
        )
    if status != 400:  # 5xx, or 401/403: the cluster or the service's credentials
        return SearchUnavailable(f"Elasticsearch failed ({status})")
    log.warning("Elasticsearch refused a query (%s): %s: %s", status, kind, reason[:500])
    return QueryRefused(f"the index cannot take a value of this request ({kind})")


def _reason(error: Any) -> tuple[str, str]:
    """The type of an Elasticsearch error body and every reason inside it, as one text."""
    if not isinstance(error, dict):
        return "error", str(error or "")
    kind = str(error.get("type", "error"))
    causes = [error, *(error.get("root_cause") or []), error.get("caused_by") or {}]
    causes += [f.get("reason") or {} for f in error.get("failed_shards") or []]
    text = " ".join(f"{c.get('type', '')}: {c.get('reason', '')}" for c in causes if c)
    return kind, text
