"""The five ways of answering a query, each one call per query (I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from elasticsearch import AsyncElasticsearch

from bench.corpus import KNOWLEDGE_ID, TENANT, Query
from retrieval_svc.acl import is_visible, stored_roles
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.filters import FieldCatalog, compile_filter, parse_filter
from retrieval_svc.search.query import search_body

TOP_K = 10
WORKAROUND_K = 100


@dataclass(frozen=True)
class Prepared:
    """A query with what the raw scenarios need: effective roles and compiled filters."""

    query: Query
    roles: frozenset[str]
    filters: list[dict[str, Any]]

    def body(self, size: int = TOP_K) -> dict[str, Any]:
        """Exactly the search the service sends (its own compiler)."""
        return search_body(
            query=self.query.text,
            tenant=TENANT,
            knowledge_ids=[KNOWLEDGE_ID],
            roles=self.roles,
            filters=self.filters,
            size=size,
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
    """Calls for each scenario; each returns (chunk ids in order, ES took in ms or None)."""

    def __init__(self, es: AsyncElasticsearch, http: httpx.AsyncClient, alias: str) -> None:
        self.es, self.http, self.alias = es, http, alias

    async def raw(self, p: Prepared) -> tuple[list[str], int]:
        resp = await self.es.search(index=self.alias, **p.body())
        return [h["_id"] for h in resp["hits"]["hits"]], int(resp["took"])

    async def service(self, p: Prepared, web: bool = False) -> tuple[list[str], int]:
        body: dict[str, Any] = {
            "query": p.query.text,
            "knowledge_ids": [KNOWLEDGE_ID],
            "top_k": TOP_K,
            "principal": {"roles": p.query.roles},
        }
        if p.query.filter:
            body["filter"] = p.query.filter
        if web:
            body["web"] = {"enabled": True, "max_results": 3}
        resp = await self.http.post("/v1/search", json=body)
        resp.raise_for_status()
        out = resp.json()
        if web and out["meta"]["web"]["status"] != "ok":
            raise RuntimeError(f"web status {out['meta']['web']['status']}")
        ids = [c["chunk_id"] for c in out["chunk_metadata"] if c["source_type"] == "rag"]
        return ids, int(out["meta"]["es_took_ms"])

    async def service_web(self, p: Prepared) -> tuple[list[str], int]:
        return await self.service(p, web=True)

    async def dify(self, p: Prepared) -> tuple[list[str], None]:
        conditions = [
            *p.query.dify_conditions,
            {"name": "user_roles", "comparison_operator": "in", "value": p.query.roles},
        ]
        resp = await self.http.post(
            "/retrieval",
            json={
                "knowledge_id": KNOWLEDGE_ID,
                "query": p.query.text,
                "retrieval_setting": {"top_k": TOP_K, "score_threshold": 0},
                "metadata_condition": {"logical_operator": "and", "conditions": conditions},
            },
        )
        resp.raise_for_status()
        return [r["metadata"]["chunk_id"] for r in resp.json()["records"]], None

    async def workaround(self, p: Prepared) -> tuple[list[str], int]:
        """What users write today: top-100 without the ACL, filtered in Python."""
        body = p.body(size=WORKAROUND_K)
        clauses = body["query"]["bool"]["filter"]
        del clauses[1]  # search_body puts the ACL clause second
        resp = await self.es.search(index=self.alias, **body)
        kept = [
            h["_id"]
            for h in resp["hits"]["hits"]
            if is_visible(stored_roles(h["_source"]), p.roles)
        ]
        return kept[:TOP_K], int(resp["took"])


def recall_at_k(expected: list[list[str]], got: list[list[str]]) -> float:
    """Mean share of each query's expected top-k found in the other result (empty = 1)."""
    shares = []
    for want, have in zip(expected, got, strict=True):
        if want:
            shares.append(len(set(want) & set(have)) / len(want))
    return round(sum(shares) / len(shares), 4) if shares else 1.0
