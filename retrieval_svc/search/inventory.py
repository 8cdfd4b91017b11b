"""What a knowledge base holds, document by document, and a document's chunks as stored: the
operator's check of a parse (issue #34 §4), for ``retrieval-indexer show`` and the console's
*Documents* page. Reads of one tenant's index, never another's; visible or not (an operator's
view, behind the admin rules of the console and the CLI's own cluster credentials)."""

from __future__ import annotations

from typing import Any

from elasticsearch import AsyncElasticsearch

from retrieval_svc.acl import tenant_query

MAX_DOCUMENTS = 1000  # documents listed at most (by name): the view says when there are more
MAX_CHUNKS = 2000  # chunks of one document shown at most
_FIRST = ["document_title", "document_name", "source_file_url", "indexed_at", "metadata"]


def _scope(tenant: str, knowledge_id: str, *more: dict[str, Any]) -> dict[str, Any]:
    return {
        "bool": {"filter": [tenant_query(tenant), {"term": {"knowledge_id": knowledge_id}}, *more]}
    }


def _document_row(bucket: dict[str, Any]) -> dict[str, Any]:
    hit = bucket["first"]["hits"]["hits"][0]["_source"]
    meta = hit.get("metadata") or {}
    return {
        "document_id": bucket["key"],
        "title": str(hit.get("document_title") or bucket["key"]),
        "name": str(hit.get("document_name") or ""),
        "format": str(meta.get("format") or ""),
        "pages": meta.get("pages"),
        "ocr_pages": meta.get("ocr_pages") or 0,
        "chunks": bucket["doc_count"],
        "restricted": bucket["restricted"]["doc_count"] > 0,
        "indexed_at": hit.get("indexed_at"),
    }


async def documents_of(
    es: AsyncElasticsearch, index: str, tenant: str, knowledge_id: str
) -> dict[str, Any]:
    """The knowledge base's documents (title, file, format, pages, pages read by OCR, chunks,
    whether restricted), by file name; ``more`` when there are over ``MAX_DOCUMENTS``; and the
    sources they came from, with their document counts."""
    response = await es.options(ignore_status=404).search(
        index=index,
        size=0,
        query=_scope(tenant, knowledge_id),
        aggs={
            "count": {"cardinality": {"field": "document_id"}},
            "d": {
                "terms": {"field": "document_id", "size": MAX_DOCUMENTS},
                "aggs": {
                    "first": {
                        "top_hits": {
                            "size": 1,
                            "sort": [{"segment_position": "asc"}],
                            "_source": _FIRST,
                        }
                    },
                    "restricted": {"filter": {"exists": {"field": "access_roles"}}},
                },
            },
            # Where its documents came from: a knowledge base may be fed by several sources,
            # each pruning only its own ("" for documents written before sources were kept).
            "sources": {
                "terms": {"field": "source_name", "size": 100, "missing": ""},
                "aggs": {"documents": {"cardinality": {"field": "document_id"}}},
            },
        },
    )
    aggs = response.body.get("aggregations") if isinstance(response.body, dict) else None
    if not aggs:
        return {"documents": [], "total": 0, "more": False, "sources": []}
    rows = sorted((_document_row(b) for b in aggs["d"]["buckets"]), key=lambda r: r["name"])
    total = int(aggs["count"]["value"])
    sources = [
        {"source": b["key"], "documents": int(b["documents"]["value"])}
        for b in aggs["sources"]["buckets"]
    ]
    return {"documents": rows, "total": total, "more": total > len(rows), "sources": sources}


async def chunks_of(
    es: AsyncElasticsearch, index: str, tenant: str, knowledge_id: str, document_id: str
) -> list[dict[str, Any]]:
    """One document's chunks as stored, in order: position, heading path, text, roles, and
    what the reader marked (a page read by OCR, its confidence)."""
    response = await es.options(ignore_status=404).search(
        index=index,
        query=_scope(tenant, knowledge_id, {"term": {"document_id": document_id}}),
        size=MAX_CHUNKS,
        sort=[{"segment_position": "asc"}],
        source_includes=[
            "chunk_id",
            "segment_position",
            "content",
            "access_roles",
            "metadata",
            "document_title",
            "document_name",
        ],
    )
    hits = response.body.get("hits", {}).get("hits", []) if isinstance(response.body, dict) else []
    out = []
    for hit in hits:
        chunk = hit["_source"]
        meta = chunk.get("metadata") or {}
        out.append(
            {
                "chunk_id": chunk.get("chunk_id"),
                "position": chunk.get("segment_position"),
                "headings": list(meta.get("headings") or []),
                "content": chunk.get("content", ""),
                "access_roles": list(chunk.get("access_roles") or []),
                "roles_set_by": meta.get("access_roles_from"),  # (design.md §16)
                "ocr_confidence": meta.get("ocr_confidence") if meta.get("ocr") else None,
                "page": meta.get("page"),
                "title": chunk.get("document_title"),
                "name": chunk.get("document_name"),
            }
        )
    return out
