"""``Searches`` sends what the client's ``search`` and ``msearch`` send, and fails as they do.

The transport is the boundary: both paths are run against the same recording transport, so
any drift in the client (its headers, timeout, retries, the exception for a status) after an
upgrade fails here rather than changing what the service sends. What Elasticsearch does with
the requests is held by the integration tests, against the real one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
from elasticsearch import ApiError, AsyncElasticsearch, BadRequestError, NotFoundError

from retrieval_svc.search.calls import Searches
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings

BODY = {"query": {"match": {"content": "巡检"}}, "size": 10, "track_total_hits": False}


def recording(es: AsyncElasticsearch, status: int = 200, answer: Any = None) -> list[Any]:
    """Every request ``es``'s transport is asked to send, answered with ``status``."""
    sent: list[Any] = []

    async def perform_request(method: str, path: str, **kwargs: Any) -> Any:
        kwargs.pop("otel_span", None)  # the client's own span object: one per call
        headers = {k.lower(): v for k, v in dict(kwargs.pop("headers")).items()}
        sent.append((method, path, headers, kwargs))
        meta = ApiResponseMeta(
            status=status,
            http_version="1.1",
            headers=HttpHeaders({"x-elastic-product": "Elasticsearch"}),
            duration=0.0,
            node=NodeConfig("http", "127.0.0.1", 9200),
        )
        return meta, answer if answer is not None else {"took": 1, "hits": {"hits": []}}

    es.transport.perform_request = perform_request  # type: ignore[method-assign]
    return sent


def client(**settings: Any) -> AsyncElasticsearch:
    return make_es_client(
        ElasticsearchSettings(es_url="http://127.0.0.1:9200", **settings), timeout_s=7
    )


@pytest.mark.parametrize(
    "auth", [{}, {"es_api_key": "a2V5OnNlY3JldA=="}, {"es_username": "u", "es_password": "p"}]
)
def test_search_and_msearch_send_what_the_client_sends(auth: dict[str, Any]) -> None:
    async def run() -> None:
        es = client(**auth)
        try:
            sent = recording(es)
            await es.search(index="rsvc-t.acme", **BODY)
            await Searches(es).search("rsvc-t.acme", dict(BODY))
            lines = [{"index": "rsvc-t.acme"}, BODY, {"index": "rsvc-t.acme"}, BODY]
            await es.msearch(searches=lines)
            await Searches(es).msearch(lines)
        finally:
            await es.close()
        typed_search, direct_search, typed_msearch, direct_msearch = sent
        assert direct_search == typed_search
        assert direct_msearch == typed_msearch
        assert typed_search[3]["request_timeout"] == 7 and typed_search[3]["max_retries"] == 1
        if auth:
            assert "authorization" in direct_search[2]

    asyncio.run(run())


@pytest.mark.parametrize(
    ("status", "kind"), [(404, NotFoundError), (400, BadRequestError), (418, ApiError)]
)
def test_an_error_status_raises_the_clients_exception(status: int, kind: type[ApiError]) -> None:
    error = {
        "error": {"type": "index_not_found_exception", "reason": "no such index"},
        "status": status,
    }

    async def run() -> None:
        es = client()
        try:
            recording(es, status, error)
            with pytest.raises(ApiError) as typed:
                await es.search(index="missing", **BODY)
            with pytest.raises(ApiError) as direct:
                await Searches(es).search("missing", dict(BODY))
        finally:
            await es.close()
        assert type(direct.value) is type(typed.value) is kind
        assert direct.value.meta.status == status
        assert direct.value.body == typed.value.body == error
        assert str(direct.value) == str(typed.value)

    asyncio.run(run())
