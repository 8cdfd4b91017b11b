"""Refusals on the retrieval routes, seen where the operator looks.

Dify keeps only a 200's records: on its knowledge-retrieval path a refused request (a wrong
key, an unknown user, an unresolved variable…) becomes "nothing found", and the service's
message reaches only the Dify API server's log. So every refusal (a 4xx) of ``/retrieval``,
``/v1/search``, the tool and MCP (a refused connection or tool call: ``route="/mcp"``) is
counted here by route, key and reason (``rsvc_refusals_total``, alerted on in the Helm chart),
named in the request's log line, and kept for the console's *Knowledge bases* page: the last
refusals per key and reason, of this process, per tenant (a wrong key has no tenant: it is in
the metric and the log only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from retrieval_svc.errors import REFUSAL_REASONS, ServiceError
from retrieval_svc.key_entry import ApiKeyConfig
from retrieval_svc.metrics import Metrics
from retrieval_svc.observability import log_fields

NO_KEY = "-"  # the key label of a request no key matched
MESSAGE_CHARS = 300  # what the console keeps of a refusal's message


def reason_of(exc: ServiceError, route: str, raw: bytes | None = None) -> str:
    """Why ``exc`` refused a request on ``route``: one of ``REFUSAL_REASONS``. ``raw``: the
    body, when it did not parse (Dify's registration probe is told apart from a bad body)."""
    reason = exc.reason
    if reason == "invalid_request":
        if raw is not None and route == "/retrieval" and _probe(raw):
            return "probe"
        if (exc.path or "").startswith(("metadata_condition", "filter")):
            return "bad_condition"
    return reason if reason in REFUSAL_REASONS else "other"


def _probe(raw: bytes) -> bool:
    """Whether ``raw`` is what Dify sends when an external knowledge base is registered: no
    body (older versions), or an empty knowledge_id and query."""
    if not raw.strip():
        return True
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("knowledge_id") == "" and not body.get("query")


@dataclass(slots=True)
class Refused:
    """One key's refusals for one reason: how many, and the last one."""

    key: str
    reason: str
    count: int
    last: float
    knowledge_id: str
    status: int
    error_code: int
    message: str  # the last one's message, in English (the console words it for its reader)


class RecentRefusals:
    """The last refusals per tenant, by key and reason (this process's; ``size`` per tenant,
    the least recently seen forgotten first)."""

    def __init__(self, size: int = 100) -> None:
        self.size = size
        self._seen: dict[str, dict[tuple[str, str], Refused]] = {}

    def saw(
        self, key: ApiKeyConfig, reason: str, exc: ServiceError, knowledge_id: str = ""
    ) -> None:
        """Note one refusal of a request made with ``key``."""
        mine = self._seen.setdefault(key.tenant, {})
        entry = mine.pop((key.name, reason), None)
        if entry is None:
            entry = Refused(key.name, reason, 0, 0.0, "", 0, 0, "")
        entry.count += 1
        entry.last = time.time()
        entry.knowledge_id = knowledge_id[:255]
        entry.status, entry.error_code = exc.status_code, exc.error_code
        entry.message = exc.message[:MESSAGE_CHARS]
        mine[(key.name, reason)] = entry  # (moved to the end: the most recent)
        while len(mine) > self.size:
            del mine[next(iter(mine))]

    def recent(self, tenant: str) -> list[Refused]:
        """The tenant's refusals, most recent first."""
        return list(reversed(self._seen.get(tenant, {}).values()))


def note_refusal(
    metrics: Metrics,
    recent: RecentRefusals,
    route: str,
    key: ApiKeyConfig | None,
    exc: ServiceError,
    *,
    knowledge_id: str = "",
    raw: bytes | None = None,
) -> None:
    """Count, log and keep one refused request (a 4xx; a 5xx is a failure, not a refusal)."""
    if exc.status_code >= 500:
        return
    reason = reason_of(exc, route, raw)
    metrics.refusals.labels(route=route, key=key.name if key else NO_KEY, reason=reason).inc()
    log_fields(refused=reason)
    if key is not None:
        recent.saw(key, reason, exc, knowledge_id)
