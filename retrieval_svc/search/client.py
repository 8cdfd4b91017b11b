"""The Elasticsearch client of a process (the service's and the indexer's)."""

from __future__ import annotations

from typing import Any

import orjson
from elastic_transport import NdjsonSerializer
from elasticsearch import AsyncElasticsearch, OrjsonSerializer

from retrieval_svc.settings import ElasticsearchSettings


class _OrjsonNdjsonSerializer(NdjsonSerializer):
    """Bulk bodies (NDJSON) through orjson, like the JSON ones."""

    def json_dumps(self, data: Any) -> bytes:
        return orjson.dumps(data, default=self.default)

    def json_loads(self, data: bytes) -> Any:
        return orjson.loads(data)


def _serializers() -> dict[str, Any]:
    """orjson for every body: request and response (de)serialisation is the service's and the
    indexer's main Python cost per Elasticsearch call."""
    json_ = OrjsonSerializer()
    ndjson = _OrjsonNdjsonSerializer()
    return {
        "application/json": json_,
        "application/vnd.elasticsearch+json": json_,
        "application/x-ndjson": ndjson,
        "application/vnd.elasticsearch+x-ndjson": ndjson,
    }


def make_es_client(
    settings: ElasticsearchSettings, *, timeout_s: float | None = None
) -> AsyncElasticsearch:
    """The one Elasticsearch client of a process.

    It holds every node in ``es_url`` (and, with ``es_sniff``, the ones it discovers) and
    spreads requests over them; a request whose node dies or answers 502/503/504/429 is
    retried once on another node (``max_retries=1``), never twice, so the request deadline
    still holds. A dead node rests and is tried again later.
    """
    options: dict[str, Any] = {}
    if settings.es_sniff:
        options |= {
            "sniff_on_start": True,
            "sniff_on_node_failure": True,
            "min_delay_between_sniffing": 10,
        }
    if settings.es_username and settings.es_password:
        options["basic_auth"] = (settings.es_username, settings.es_password.get_secret_value())
    if settings.es_api_key:
        options["api_key"] = settings.es_api_key.get_secret_value()
    if settings.es_ca_certs:
        options["ca_certs"] = str(settings.es_ca_certs)
    return AsyncElasticsearch(
        settings.es_hosts,
        request_timeout=timeout_s or settings.es_timeout_s,
        max_retries=1,
        retry_on_timeout=False,
        serializers=_serializers(),
        **options,
    )
