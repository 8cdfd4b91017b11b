"""Every Elasticsearch call of the service's search layer goes through ``ElasticCalls._call``:
under what is left of the request's deadline, timed per operation, and with Elasticsearch and
transport exceptions translated into service errors here, at the one place they are raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from elastic_transport import SerializationError
from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    TransportError,
)

from retrieval_svc.deadline import remaining
from retrieval_svc.errors import DeadlineExceeded, QueryRefused, SearchUnavailable
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.failures import Reachability, refusal
from retrieval_svc.tenancy import tenant_alias

log = logging.getLogger(__name__)


class ElasticCalls:
    """A tenant's alias, and calls to Elasticsearch within the request's deadline."""

    def __init__(
        self, es: AsyncElasticsearch, *, alias: str, deadline_s: float, metrics: Metrics
    ) -> None:
        self._es = es
        self._alias = alias  # the prefix of every tenant's alias
        self._deadline_s = deadline_s
        self._metrics = metrics
        self.reachability = Reachability()

    def index(self, tenant: str) -> str:
        """The alias ``tenant``'s chunks are read through."""
        return tenant_alias(self._alias, tenant)

    async def _call(self, operation: str, request: Any, *, bound_s: float | None = None) -> Any:
        """``request`` under what is left of the request's deadline (``bound_s`` instead of the
        request deadline as the bound: a background refresh, outside any request)."""
        started = time.perf_counter()
        outcome = "ok"
        try:
            async with asyncio.timeout(max(0.0, remaining(bound_s or self._deadline_s))):
                response = await request
            self.reachability.reached()
            return response
        except BaseException as exc:
            outcome = type(exc).__name__
            translated = self._translate(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            self._metrics.es_seconds.labels(operation=operation, outcome=outcome).observe(
                time.perf_counter() - started
            )

    def _translate(self, exc: BaseException) -> BaseException:
        """The service error for an Elasticsearch or transport failure (else ``exc``)."""
        if isinstance(exc, TimeoutError | ConnectionTimeout):
            return DeadlineExceeded("Elasticsearch did not answer within the deadline")
        if isinstance(exc, NotFoundError):
            return SearchUnavailable(
                "the tenant's index does not exist; run `retrieval-indexer init --tenant …`"
            )
        if isinstance(exc, SerializationError):  # a value the client cannot write as JSON
            log.warning("a query could not be serialised: %s", exc)
            return QueryRefused("a value of the request cannot be sent to the index")
        if isinstance(exc, ConnectionError | TransportError):
            self.reachability.failed(type(exc).__name__)
            return SearchUnavailable("Elasticsearch is unreachable")
        if isinstance(exc, ApiError):
            return refusal(exc.meta.status, exc.body.get("error") if exc.body else None)
        return exc
