"""Every Elasticsearch call of the service's search layer goes through ``ElasticCalls._call``:
under what is left of the request's deadline, timed per operation, and with Elasticsearch and
transport exceptions translated into service errors here, at the one place they are raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from elastic_transport import ObjectApiResponse, SerializationError
from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    TransportError,
)
from elasticsearch.exceptions import HTTP_EXCEPTIONS

from retrieval_svc.deadline import remaining
from retrieval_svc.errors import DeadlineExceeded, QueryRefused, SearchUnavailable
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.failures import Reachability, refusal
from retrieval_svc.tenancy import tenant_alias
from retrieval_svc.words import say

log = logging.getLogger(__name__)


_COMPAT_JSON = "application/vnd.elasticsearch+json; compatible-with=8"
_COMPAT_NDJSON = "application/vnd.elasticsearch+x-ndjson; compatible-with=8"


class Searches:
    """The requests of every retrieval, ``_search`` and ``_msearch``, sent as the client's
    ``search`` and ``msearch`` send them (its headers, timeout and retries; its transport's
    node pool and serialisers; its exception for each error status), straight to its
    transport. What is skipped is per call: the rewriting of every keyword into the body, an
    OpenTelemetry span (a no-op without a tracer provider, which the service never installs),
    a copy of the headers rewritten by regular expression, and the product check the client
    makes once, on its first request. Measured in the app, 0.13 ms of CPU less per
    retrieval, a tenth of what the service adds to Elasticsearch's own (issue #38). Every
    other call of the service goes through the client.
    """

    def __init__(self, es: AsyncElasticsearch) -> None:
        self._es = es
        # What the client's ``perform_request`` passes its transport on each call; the
        # request headers are its own (authorization) with the mimetypes it would set.
        # ``tests/unit/test_search_calls.py`` holds this to what ``es.search`` sends.
        headers = dict(es._headers)
        self._json = {**headers, "Accept": _COMPAT_JSON, "Content-Type": _COMPAT_JSON}
        self._ndjson = {**headers, "Accept": _COMPAT_JSON, "Content-Type": _COMPAT_NDJSON}
        self._options: dict[str, Any] = {
            "request_timeout": es._request_timeout,
            "max_retries": es._max_retries,
            "retry_on_status": es._retry_on_status,
            "retry_on_timeout": es._retry_on_timeout,
            "client_meta": es._client_meta,
        }

    async def search(self, index: str, body: dict[str, Any]) -> ObjectApiResponse[Any]:
        """``POST /{index}/_search`` with ``body``."""
        return await self._post(f"/{quote(index, safe=',')}/_search", self._json, body)

    async def msearch(self, searches: Sequence[dict[str, Any]]) -> ObjectApiResponse[Any]:
        """``POST /_msearch`` with its header and body lines."""
        return await self._post("/_msearch", self._ndjson, list(searches))

    async def _post(self, path: str, headers: dict[str, str], body: Any) -> ObjectApiResponse[Any]:
        # The transport is looked up on each call: a test counting requests replaces it.
        meta, answer = await self._es.transport.perform_request(
            "POST", path, headers=headers, body=body, **self._options
        )
        if not 200 <= meta.status < 300:
            error = answer.get("error") if isinstance(answer, dict) else None
            kind = error.get("type") if isinstance(error, dict) else None
            raise HTTP_EXCEPTIONS.get(meta.status, ApiError)(
                message=str(kind or error or answer), meta=meta, body=answer
            )
        return ObjectApiResponse(body=answer, meta=meta)


class ElasticCalls:
    """A tenant's alias, and calls to Elasticsearch within the request's deadline."""

    def __init__(
        self, es: AsyncElasticsearch, *, alias: str, deadline_s: float, metrics: Metrics
    ) -> None:
        self._es = es
        self._searches = Searches(es)
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
            log.warning(say("log_not_serialised", why=exc))
            return QueryRefused("a value of the request cannot be sent to the index")
        if isinstance(exc, ConnectionError | TransportError):
            self.reachability.failed(type(exc).__name__)
            return SearchUnavailable("Elasticsearch is unreachable")
        if isinstance(exc, ApiError):
            return refusal(exc.meta.status, exc.body.get("error") if exc.body else None)
        return exc
