"""Building the Elasticsearch requests for a retrieval (pure: no I/O).

BM25 relevance is one request, kNN another; both carry the same filter clauses (knowledge
bases, the ACL, the caller's filter), and the kNN request carries them *inside* ``knn.filter``
so Elasticsearch searches only the visible part of the vector graph (a post-filter would
return fewer than ``k`` visible hits). Raw BM25 scores are unbounded, so they are mapped onto
[0, 1) with the saturating function ``s / (s + k)``: monotone (ranking is unchanged),
absolute (the same match scores the same whatever else is in the result, so a threshold
means something), and ``k`` is the raw score that maps to 0.5 (setting ``RSVC_SCORE_SATURATION``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from retrieval_svc.acl import acl_query, tenant_query
from retrieval_svc.search.segment import segment

# Fields the index needs and an answer does not: never sent back (half the bytes otherwise).
SOURCE_EXCLUDES = ("embedding", "content_seg", "from_bytes")


def normalize_score(raw: float, saturation: float) -> float:
    """Map a raw BM25 score onto [0, 1)."""
    if raw <= 0:
        return 0.0
    return raw / (raw + saturation)


def raw_score_floor(threshold: float, saturation: float) -> float | None:
    """The raw score at which ``normalize_score`` reaches ``threshold`` (None: no floor)."""
    if threshold <= 0:
        return None
    if threshold >= 1:
        return float("inf")
    return threshold * saturation / (1 - threshold)


TextFields = Literal["shingle", "segmented", "both"]


def text_query(query: str, fields: TextFields = "shingle") -> dict[str, Any]:
    """Full-text relevance: the chunk's content (bigram view, jieba-word view, or both), and
    its document's title at half weight."""
    should: list[dict[str, Any]] = []
    if fields in ("shingle", "both"):
        should.append({"match": {"content": {"query": query}}})
    if fields in ("segmented", "both"):
        should.append({"match": {"content_seg": {"query": segment(query)}}})
    should.append({"match": {"document_title": {"query": query, "boost": 0.5}}})
    return {"bool": {"should": should, "minimum_should_match": 1}}


def filter_clauses(
    tenant: str,
    knowledge_ids: Collection[str],
    roles: Collection[str],
    filters: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """What every request of a retrieval is restricted to: the principal's tenant and its ACL
    (side by side), the knowledge bases, the caller's filters."""
    return [
        tenant_query(tenant),
        acl_query(roles),
        {"terms": {"knowledge_id": sorted(knowledge_ids)}},
        *filters,
    ]


#: Candidates the HNSW search gathers per neighbour asked for, at least (``num_candidates``
#: is ``max(RSVC_KNN_NUM_CANDIDATES, CANDIDATES_PER_HIT × k)``, at most Elasticsearch's 10,000).
CANDIDATES_PER_HIT = 10
MAX_CANDIDATES = 10_000


def candidates_for(k: int, num_candidates: int) -> int:
    """``num_candidates`` for a kNN search of ``k`` neighbours (issue #25, measured at 1M
    chunks, 384 dimensions, ``int8_hnsw`` with rescoring, a principal who sees every chunk:
    recall@10 against exact search was 0.79 with 100 candidates, 0.91–0.92 with 200, 0.97
    with 500, 0.99 with 1,000, for a kNN p50 of 12, 16 and 24 ms). Selective filters need no
    more: Lucene searches them exactly (1% visible and below at 1M chunks, 10% and below at
    100k), recall 1.0."""
    return min(MAX_CANDIDATES, max(num_candidates, CANDIDATES_PER_HIT * k, k))


def knn_body(
    *,
    vector: Sequence[float],
    tenant: str,
    knowledge_ids: Collection[str],
    roles: Collection[str],
    filters: Sequence[dict[str, Any]] = (),
    k: int,
    num_candidates: int,
    oversample: float = 0.0,
) -> dict[str, Any]:
    """The kNN request: the filter clauses inside ``knn.filter`` (a pre-filter).

    ``oversample``: the approximate search gathers ``k × oversample`` neighbours over the
    quantized vectors and Elasticsearch rescores them with the full-precision ones (0: off).
    int8 quantization alone turns neighbours of a tight cluster into ties: recall@10 against
    exact search fell to 0.93 in a merged index whatever ``num_candidates``, and was 1.0 with
    ``oversample`` 2 or 3 (issue #25). A float ``hnsw``/``flat`` field ignores it.
    """
    knn: dict[str, Any] = {
        "field": "embedding",
        "query_vector": list(vector),
        "k": k,
        "num_candidates": candidates_for(k, num_candidates),
        "filter": {"bool": {"filter": filter_clauses(tenant, knowledge_ids, roles, filters)}},
    }
    if oversample:
        knn["rescore_vector"] = {"oversample": oversample}
    return {
        "knn": knn,
        "size": k,
        "_source": {"excludes": list(SOURCE_EXCLUDES)},
        "track_total_hits": False,
    }


def search_body(
    *,
    query: str,
    tenant: str,
    knowledge_ids: Collection[str],
    roles: Collection[str],
    filters: Sequence[dict[str, Any]] = (),
    size: int,
    min_score: float | None = None,
    text_fields: TextFields = "shingle",
) -> dict[str, Any]:
    """The BM25 request: relevance scoring, with knowledge bases, ACL and filters ANDed."""
    clauses = filter_clauses(tenant, knowledge_ids, roles, filters)
    body: dict[str, Any] = {
        "query": {"bool": {"must": [text_query(query, text_fields)], "filter": clauses}},
        "size": size,
        "_source": {"excludes": list(SOURCE_EXCLUDES)},
        "track_total_hits": False,
    }
    if min_score is not None:
        body["min_score"] = min_score
    return body
