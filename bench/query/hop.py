"""The floor under any service in front of Elasticsearch (``python -m bench.query --hop``).

An HTTP hop that does nothing but forward: it takes the search body the raw scenario sends,
passes it to Elasticsearch through the service's own client (``make_es_client``: orjson,
aiohttp, the same retry settings) and returns Elasticsearch's answer as it came. It runs on
the service's HTTP stack (uvicorn with uvloop and httptools, no access log). No keys, no
policy, no ACL check, no chunks, no logging, no metrics.

On a machine whose cores Elasticsearch, the service and the load generator share, its
QPS over raw is the most any service written this way can reach there: whatever the
service does beyond forwarding comes on top of this hop's CPU.

    python -m bench.query.hop --port 18081 --alias rsvc-bench   # RSVC_ES_URL names the nodes
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import orjson
import uvicorn
from elasticsearch import AsyncElasticsearch
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from retrieval_svc.direct import read_body
from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings


class Hop:
    """``POST /search``: the body to ``{alias}/_search``, the answer back; ``GET /readyz``."""

    def __init__(self, es_url: str, alias: str) -> None:
        self.es_url, self.alias = es_url, alias
        self._es: AsyncElasticsearch | None = None  # opened in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        route = (scope["method"], scope["path"])
        if route == ("GET", "/readyz"):
            response = Response(b'{"ready": true}', media_type="application/json")
        elif route == ("POST", "/search"):
            response = Response(
                await self._search(await read_body(receive)), media_type="application/json"
            )
        else:
            response = Response(b'{"error": "POST /search"}', 404, media_type="application/json")
        await response(scope, receive, send)

    async def _search(self, body: bytes) -> bytes:
        if self._es is None:
            self._es = make_es_client(ElasticsearchSettings(es_url=self.es_url))
        query: dict[str, Any] = orjson.loads(body)
        response = await self._es.search(index=self.alias, **query)
        return orjson.dumps(response.body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", required=True)
    args = parser.parse_args()
    hop = Hop(os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200"), args.alias)
    uvicorn.run(
        hop,
        host="127.0.0.1",
        port=args.port,
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
    )


if __name__ == "__main__":
    main()
