"""What a tenant's index holds, for listings, the field catalog and the operator: its
knowledge bases (all, or those visible to some roles), its fields, its stored chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_svc.acl import ACL_FIELD, ALSO_FIELD, DENIED_FIELD, acl_query, tenant_query
from retrieval_svc.search import inventory
from retrieval_svc.search.calls import ElasticCalls
from retrieval_svc.search.query import SOURCE_EXCLUDES

# ``field_owners``: (knowledge base, role) pairs a page, and buckets a page at most (pairs ×
# fields; Elasticsearch refuses a search of more than ``search.max_buckets``, 65,536 by default).
OWNERS_PAGE = 1000
OWNERS_BUCKETS = 50_000

# One bucket per (knowledge base, role, also, deny); a chunk without ``access_also`` and
# ``access_denied`` (all but a share's) has one per role, as before they existed.
_SOURCES: list[dict[str, Any]] = [
    {"kb": {"terms": {"field": "knowledge_id"}}},
    {"role": {"terms": {"field": ACL_FIELD, "missing_bucket": True}}},
    {"also": {"terms": {"field": ALSO_FIELD, "missing_bucket": True}}},
    {"denied": {"terms": {"field": DENIED_FIELD, "missing_bucket": True}}},
]


@dataclass(frozen=True, slots=True)
class Guard:
    """Who sees a chunk that has ``access_also`` or ``access_denied``: a holder of ``role``
    (None: any) and of ``also`` (None: any) who holds none of ``denied``."""

    role: str | None
    also: str | None
    denied: frozenset[str]

    def admits(self, roles: Collection[str]) -> bool:
        """Whether holders of ``roles`` see the chunks counted under this guard."""
        return (
            (self.role is None or self.role in roles)
            and (self.also is None or self.also in roles)
            and self.denied.isdisjoint(roles)
        )


Owner = str | Guard | None  # a field owner: a role, a guarded role, or None (public chunks)

# Per knowledge base: its display name and distinct documents (the chunks are the doc_count).
KB_AGGS: dict[str, Any] = {
    "documents": {"cardinality": {"field": "document_id"}},
    "name": {"terms": {"field": "dataset_name", "size": 1}},
}


def kb_row(bucket: dict[str, Any]) -> dict[str, Any]:
    """A knowledge base's id, name, documents and chunks from its ``KB_AGGS`` bucket."""
    return {
        "knowledge_id": bucket["key"],
        "name": next((n["key"] for n in bucket["name"]["buckets"]), bucket["key"]),
        "documents": bucket["documents"]["value"],
        "chunks": bucket["doc_count"],
    }


class TenantReads(ElasticCalls):
    """Reads of a tenant's index other than retrieval."""

    async def missing_knowledge_bases(self, tenant: str, knowledge_ids: Sequence[str]) -> list[str]:
        """Which of ``knowledge_ids`` hold no chunk in ``tenant`` (visible or not), in one
        request; another tenant's knowledge base of the same id does not count."""
        wanted = sorted(set(knowledge_ids))
        response = await self._call(
            "knowledge_bases",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant)]}},
                aggs={
                    "kb": {
                        "terms": {"field": "knowledge_id", "include": wanted, "size": len(wanted)}
                    }
                },
            ),
        )
        present = {b["key"] for b in response["aggregations"]["kb"]["buckets"]}
        return [kb for kb in knowledge_ids if kb not in present]

    async def knowledge_bases(self, tenant: str, roles: Collection[str]) -> list[dict[str, Any]]:
        """``tenant``'s knowledge bases that hold a chunk visible to holders of ``roles``, each
        with its display name and the documents and chunks visible (one request)."""
        response = await self._call(
            "knowledge_bases",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant), acl_query(roles)]}},
                aggs={"kb": {"terms": {"field": "knowledge_id", "size": 1000}, "aggs": KB_AGGS}},
            ),
        )
        return [kb_row(b) for b in response["aggregations"]["kb"]["buckets"]]

    async def tenant_overview(self, tenant: str) -> dict[str, Any]:
        """For an operator: every role the tenant's chunks name, and per knowledge base its
        documents, chunks, restricted chunks and last indexing time (one request)."""
        response = await self._call(
            "tenant_overview",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant)]}},
                aggs={
                    "roles": {"terms": {"field": "access_roles", "size": 10_000}},
                    "kb": {
                        "terms": {"field": "knowledge_id", "size": 1000},
                        "aggs": {
                            **KB_AGGS,
                            "restricted": {"filter": {"exists": {"field": "access_roles"}}},
                            "last_indexed": {"max": {"field": "indexed_at"}},
                        },
                    },
                },
            ),
        )
        aggs = response["aggregations"]
        return {
            "roles": sorted(b["key"] for b in aggs["roles"]["buckets"]),
            "knowledge_bases": [
                {
                    **kb_row(b),
                    "restricted": b["restricted"]["doc_count"],
                    "last_indexed": b["last_indexed"].get("value_as_string"),
                }
                for b in aggs["kb"]["buckets"]
            ],
        }

    async def field_owners(
        self,
        tenant: str,
        paths: Sequence[str],
        *,
        bound_s: float | None = None,
        knowledge_ids: Sequence[str] | None = None,
    ) -> dict[tuple[str, Owner], frozenset[str]]:
        """For each (knowledge base, role) of ``tenant``'s chunks, which of ``paths`` those
        chunks have; role ``None`` is the public chunks (no ``access_roles``). A chunk with
        several roles counts for each. A chunk that also has ``access_also`` or
        ``access_denied`` (a share's DACL) counts under a ``Guard`` instead — its role, one of
        its ``access_also`` and its denies — so its fields are listed only to those the search
        shows it to. One composite aggregation, paged so that a page's buckets stay well
        inside Elasticsearch's ``search.max_buckets``; each page is one request of at most
        ``bound_s`` (None: what is left of the request's deadline); only ``knowledge_ids`` if
        given."""
        owners: dict[tuple[str, Owner], frozenset[str]] = {}
        if not paths:
            return owners
        scope: list[dict[str, Any]] = [tenant_query(tenant)]
        if knowledge_ids is not None:
            scope.append({"terms": {"knowledge_id": sorted(set(knowledge_ids))}})
        # A bucket names one of a chunk's denies, not all: the chunks of one (role, also)
        # that have denies count together under all their denies — a holder of any sees none
        # of their fields (narrower where their denies differ, never wider).
        denies: dict[tuple[str, str | None, str | None], tuple[set[str], set[str]]] = {}
        query = {"bool": {"filter": scope}}
        async for key, has in self._owner_pages(tenant, paths, query, _SOURCES, bound_s):
            kb, role, also = key["kb"], key["role"], key["also"]
            if key["denied"] is None:
                owner = role if also is None else Guard(role, also, frozenset())
                owners[(kb, owner)] = has  # (empty: counted)
                continue
            held, fields = denies.setdefault((kb, role, also), (set(), set()))
            held.add(key["denied"])
            fields.update(has)
        for (kb, role, also), (held, fields) in denies.items():
            owners[(kb, Guard(role, also, frozenset(held)))] = frozenset(fields)
        return owners

    async def _owner_pages(
        self,
        tenant: str,
        paths: Sequence[str],
        query: dict[str, Any],
        sources: list[dict[str, Any]],
        bound_s: float | None,
    ) -> AsyncIterator[tuple[dict[str, Any], frozenset[str]]]:
        """Each composite bucket's key over ``sources``, with which of ``paths`` its chunks
        have."""
        page = max(1, min(OWNERS_PAGE, OWNERS_BUCKETS // len(paths)))
        exists = {"filters": {"filters": {p: {"exists": {"field": p}} for p in paths}}}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {"size": page, "sources": sources}
            if after is not None:
                composite["after"] = after
            response = await self._call(
                "field_owners",
                (self._es.options(request_timeout=bound_s) if bound_s else self._es).search(
                    index=self.index(tenant),
                    size=0,
                    query=query,
                    aggs={"o": {"composite": composite, "aggs": {"f": exists}}},
                ),
                bound_s=bound_s,
            )
            found = response["aggregations"]["o"]
            for bucket in found["buckets"]:
                counts = bucket["f"]["buckets"]
                has = frozenset(p for p in paths if counts.get(p, {}).get("doc_count", 0) > 0)
                yield bucket["key"], has
            after = found.get("after_key")
            if after is None or len(found["buckets"]) < page:
                return

    async def document_titles(self, tenant: str, limit: int = 1000) -> list[dict[str, str]]:
        """For an operator's pickers: up to ``limit`` of ``tenant``'s documents — id, title and
        knowledge base — by title (one request)."""
        response = await self._call(
            "document_titles",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": [tenant_query(tenant)]}},
                aggs={
                    "d": {
                        "terms": {"field": "document_id", "size": limit},
                        "aggs": {"first": {"top_hits": {
                            "size": 1, "_source": ["document_title", "knowledge_id"]}}},
                    }
                },
            ),
        )  # fmt: skip
        found = []
        for bucket in response["aggregations"]["d"]["buckets"]:
            hit = bucket["first"]["hits"]["hits"][0]["_source"]
            found.append({
                "document_id": bucket["key"],
                "title": str(hit.get("document_title") or bucket["key"]),
                "knowledge_id": str(hit.get("knowledge_id") or ""),
            })  # fmt: skip
        return sorted(found, key=lambda d: (d["title"], d["knowledge_id"]))

    async def titles_of(self, tenant: str, document_ids: Sequence[str]) -> dict[str, str]:
        """The titles of ``tenant``'s documents among ``document_ids`` (one request; for an
        operator reading the audit trail). A document gone since has none."""
        wanted = sorted(set(document_ids))[:1000]
        if not wanted:
            return {}
        scope = [tenant_query(tenant), {"terms": {"document_id": wanted}}]
        first = {"top_hits": {"size": 1, "_source": ["document_title"]}}
        response = await self._call(
            "titles_of",
            self._es.search(
                index=self.index(tenant),
                size=0,
                query={"bool": {"filter": scope}},
                aggs={
                    "d": {
                        "terms": {"field": "document_id", "size": len(wanted)},
                        "aggs": {"t": first},
                    }
                },
            ),
        )
        return {
            b["key"]: str(b["t"]["hits"]["hits"][0]["_source"].get("document_title") or b["key"])
            for b in response["aggregations"]["d"]["buckets"]
        }

    async def documents_of(self, tenant: str, knowledge_id: str) -> dict[str, Any]:
        """For an operator: a knowledge base's documents as indexed (``inventory``)."""
        listing: dict[str, Any] = await self._call(
            "documents_of",
            inventory.documents_of(self._es, self.index(tenant), tenant, knowledge_id),
        )
        return listing

    async def chunks_of(
        self, tenant: str, knowledge_id: str, document_id: str
    ) -> list[dict[str, Any]]:
        """For an operator: one document's chunks as stored (``inventory``)."""
        chunks: list[dict[str, Any]] = await self._call(
            "chunks_of",
            inventory.chunks_of(self._es, self.index(tenant), tenant, knowledge_id, document_id),
        )
        return chunks

    async def get_mappings(self, tenant: str) -> dict[str, Any]:
        """The mappings of ``tenant``'s indices (no other tenant's fields are in them)."""
        response = await self._call(
            "get_mapping", self._es.indices.get_mapping(index=self.index(tenant))
        )
        return dict(response)

    async def get_chunks(
        self, *, tenant: str, chunk_id: str | None, document_id: str | None
    ) -> list[dict[str, Any]]:
        """Stored chunks of ``tenant`` by chunk id or document id (visible or not)."""
        field, value = ("chunk_id", chunk_id) if chunk_id else ("document_id", document_id)
        response = await self._call(
            "get_chunks",
            self._es.search(
                index=self.index(tenant),
                query={"bool": {"filter": [tenant_query(tenant), {"term": {field: value}}]}},
                size=100,
                sort=[{"segment_position": "asc"}],
                source_excludes=list(SOURCE_EXCLUDES),
            ),
        )
        return [hit["_source"] for hit in response["hits"]["hits"]]
