"""The five ways of answering a query, each one call per query (I/O).

Every scenario goes through the same HTTP client (one aiohttp session, bodies in and out
through orjson), whether it calls Elasticsearch or the service: the load generator shares the
machine's cores with both, so a heavier client on one side would be counted against that side.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from bench.query.corpus import KNOWLEDGE_ID, TENANT, Query
from retrieval_svc.acl import chunk_visible
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.filters import FieldCatalog, compile_filter, parse_filter
from retrieval_svc.search.query import TextFields, search_body
from retrieval_svc.settings import Settings

TOP_K = 10
WORKAROUND_K = 100
#: The full-text fields the service queries by default; the bench's service runs with it set
#: explicitly, and the raw scenarios send the same query.
TEXT_FIELDS: TextFields = Settings.model_fields["bm25_fields"].default


@dataclass(frozen=True)
class Prepared:
    """A query with what the raw scenarios need: effective roles and compiled filters."""

    query: Query
    roles: frozenset[str]
    filters: list[dict[str, Any]]

    def body(self, size: int = TOP_K) -> dict[str, Any]:
        """Exactly the search the service sends (its own compiler, its text fields)."""
        return search_body(
            query=self.query.text,
            tenant=TENANT,
            knowledge_ids=[KNOWLEDGE_ID],
            roles=self.roles,
            filters=self.filters,
            size=size,
            text_fields=TEXT_FIELDS,
        )


def prepare(
    queries: list[Query], acl: AccessControl, catalog: FieldCatalog, tenant: str
) -> list[Prepared]:
    out = []
    for q in queries:
        filters = [compile_filter(parse_filter(q.filter), catalog)] if q.filter else []
        out.append(Prepared(q, acl.expand(q.roles, tenant), filters))
    return out


class Scenarios:
    """Calls for each scenario; each returns (chunk ids in order, ES took in ms or None).

    Raw calls go to the Elasticsearch nodes in turn, as the service's client does.
    """

    def __init__(
        self,
        http: aiohttp.ClientSession,
        *,
        es_urls: Sequence[str],
        service_url: str,
        key: str,
        alias: str,
        hop_url: str | None = None,
    ) -> None:
        self.http, self.alias, self.service_url = http, alias, service_url.rstrip("/")
        self.hop_url = hop_url
        self._nodes = itertools.cycle([u.rstrip("/") for u in es_urls])
        self._cold = itertools.count()
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        async with self.http.post(url, data=orjson.dumps(body), headers=headers) as resp:
            payload = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{url}: {resp.status} {payload[:200]!r}")
        return orjson.loads(payload)

    async def _search_es(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{next(self._nodes)}/{self.alias}/_search"
        out: dict[str, Any] = await self._post(url, body, {"Content-Type": "application/json"})
        return out

    async def _service(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await self._post(f"{self.service_url}{path}", body, self._headers)
        return out

    async def raw(self, p: Prepared) -> tuple[list[str], int]:
        resp = await self._search_es(p.body())
        return [h["_id"] for h in resp["hits"]["hits"]], int(resp["took"])

    async def hop(self, p: Prepared) -> tuple[list[str], int]:
        """The raw query through bench/query/hop.py, which only forwards it."""
        assert self.hop_url is not None, "no hop running"
        resp = await self._post(
            f"{self.hop_url}/search", p.body(), {"Content-Type": "application/json"}
        )
        return [h["_id"] for h in resp["hits"]["hits"]], int(resp["took"])

    async def service(
        self, p: Prepared, web: bool = False, extra_role: str | None = None
    ) -> tuple[list[str], int]:
        roles = [*p.query.roles, extra_role] if extra_role else p.query.roles
        body: dict[str, Any] = {
            "query": p.query.text,
            "knowledge_ids": [KNOWLEDGE_ID],
            "top_k": TOP_K,
            "principal": {"roles": roles},
        }
        if p.query.filter:
            body["filter"] = p.query.filter
        if web:
            body["web"] = {"enabled": True, "max_results": 3}
        out = await self._service("/v1/search", body)
        if web and out["meta"]["web"]["status"] != "ok":
            raise RuntimeError(f"web status {out['meta']['web']['status']}")
        ids = [c["chunk_id"] for c in out["chunk_metadata"] if c["source_type"] == "rag"]
        return ids, int(out["meta"]["es_took_ms"])

    async def service_cold(self, p: Prepared) -> tuple[list[str], int]:
        """/v1/search as a principal never seen before (issue #38): the query's roles plus a
        role of its own that no chunk has, so the answer is the same and no cache keyed by
        role set can help."""
        return await self.service(p, extra_role=f"cold-{os.getpid()}-{next(self._cold)}")

    async def service_web(self, p: Prepared) -> tuple[list[str], int]:
        return await self.service(p, web=True)

    async def dify(self, p: Prepared) -> tuple[list[str], None]:
        conditions = [
            *p.query.dify_conditions,
            {"name": "user_roles", "comparison_operator": "in", "value": p.query.roles},
        ]
        out = await self._service(
            "/retrieval",
            {
                "knowledge_id": KNOWLEDGE_ID,
                "query": p.query.text,
                "retrieval_setting": {"top_k": TOP_K, "score_threshold": 0},
                "metadata_condition": {"logical_operator": "and", "conditions": conditions},
            },
        )
        return [r["metadata"]["chunk_id"] for r in out["records"]], None

    async def workaround(self, p: Prepared) -> tuple[list[str], int]:
        """What users write today: top-100 without the ACL, filtered in Python."""
        body = p.body(size=WORKAROUND_K)
        clauses = body["query"]["bool"]["filter"]
        del clauses[1]  # search_body puts the ACL clause second
        resp = await self._search_es(body)
        kept = [h["_id"] for h in resp["hits"]["hits"] if chunk_visible(h["_source"], p.roles)]
        return kept[:TOP_K], int(resp["took"])


def client_session(connections: int) -> aiohttp.ClientSession:
    """The load generator's one keep-alive HTTP client."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, limit_per_host=connections),
        timeout=aiohttp.ClientTimeout(total=30),
    )


def recall_at_k(expected: list[list[str]], got: list[list[str]]) -> float:
    """Mean share of each query's expected top-k found in the other result (empty = 1)."""
    shares = []
    for want, have in zip(expected, got, strict=True):
        if want:
            shares.append(len(set(want) & set(have)) / len(want))
    return round(sum(shares) / len(shares), 4) if shares else 1.0
