"""The floor under any service in front of Elasticsearch (``python -m bench.run --hop``).

An HTTP hop that does nothing but forward: it takes the search body the raw scenario sends,
passes it to Elasticsearch through the service's own client (``make_es_client``: orjson,
aiohttp, the same retry settings) and returns Elasticsearch's answer as it came. It runs on
the service's HTTP stack (uvicorn with uvloop and httptools, no access log). No keys, no
policy, no ACL check, no chunks, no logging, no metrics.

On a machine whose cores Elasticsearch, the service and the load generator share, its
QPS over raw is the most any service written this way can reach there: whatever the
service does beyond forwarding comes on top of this hop's CPU.

    python -m bench.hop --port 18081 --alias rsvc-bench   # RSVC_ES_URL names the nodes
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import orjson
import uvicorn
from elasticsearch import AsyncElasticsearch
from starlette.types import Receive, Scope, Send

from retrieval_svc.search.client import make_es_client
from retrieval_svc.settings import ElasticsearchSettings

JSON = [(b"content-type", b"application/json")]


class Hop:
    """``POST /search``: the body to ``{alias}/_search``, the answer back; ``GET /readyz``."""

    def __init__(self, es_url: str, alias: str) -> None:
        self.es_url, self.alias = es_url, alias
        self._es: AsyncElasticsearch | None = None  # opened in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and scope["path"] == "/readyz":
            await self._answer(send, 200, b'{"ready": true}')
            return
        if scope["method"] != "POST" or scope["path"] != "/search":
            await self._answer(send, 404, b'{"error": "POST /search"}')
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if self._es is None:
            self._es = make_es_client(ElasticsearchSettings(es_url=self.es_url))
        query: dict[str, Any] = orjson.loads(body)
        response = await self._es.search(index=self.alias, **query)
        await self._answer(send, 200, orjson.dumps(response.body))

    @staticmethod
    async def _answer(send: Send, status: int, payload: bytes) -> None:
        headers = [*JSON, (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


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
