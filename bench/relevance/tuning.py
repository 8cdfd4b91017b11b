"""Fusion tuned offline over raw BM25 and kNN lists, and the permission-aware run."""

from __future__ import annotations

import statistics
import time
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.relevance.data import DEPTH, KB, OWN, ROLES, Question, doc_of, p50, scores
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.embedding import Embedder
from retrieval_svc.search.fusion import Hit, fuse, vector_score
from retrieval_svc.search.query import TextFields, knn_body, normalize_score, search_body

TEXT_FIELDS: tuple[TextFields, ...] = ("shingle", "segmented", "both")


async def raw_lists(
    es: AsyncElasticsearch,
    embedder: Embedder,
    questions: list[Question],
    num_candidates: int,
    oversample: float,
) -> tuple[dict[str, list[list[Hit]]], list[list[Hit]], list[float], dict[str, float]]:
    """Every question's BM25 candidates (per text view) and kNN candidates with raw scores,
    the query-embedding times, and Elasticsearch's own ``took`` p50 (ms) per request kind."""
    bm25_lists: dict[str, list[list[Hit]]] = {f: [] for f in TEXT_FIELDS}
    knn_lists: list[list[Hit]] = []
    embed_ms: list[float] = []
    took: dict[str, list[float]] = {"knn": [], **{f: [] for f in TEXT_FIELDS}}
    for q in questions:
        started = time.perf_counter()
        (vector,) = await embedder.embed_queries([q.text])
        embed_ms.append((time.perf_counter() - started) * 1000)
        for fields in TEXT_FIELDS:
            body = search_body(
                query=q.text,
                tenant=DEFAULT_TENANT,
                knowledge_ids=[KB],
                roles=ROLES,
                size=DEPTH * 2,
                text_fields=fields,
            )
            text = await es.search(index=OWN, **body)
            took[fields].append(float(text["took"]))
            hits = [Hit(doc_of(h["_source"]), {}, h["_score"]) for h in text["hits"]["hits"]]
            bm25_lists[fields].append(hits)
        knn = await es.search(
            index=OWN,
            **knn_body(
                vector=vector,
                tenant=DEFAULT_TENANT,
                knowledge_ids=[KB],
                roles=ROLES,
                k=DEPTH * 2,
                num_candidates=num_candidates,
                oversample=oversample,
            ),
        )
        took["knn"].append(float(knn["took"]))
        knn_lists.append([Hit(doc_of(h["_source"]), {}, h["_score"]) for h in knn["hits"]["hits"]])
    return bm25_lists, knn_lists, embed_ms, {k: p50(v) for k, v in took.items()}


def dedupe(hits: list[Hit]) -> list[Hit]:
    """The best-scoring chunk of each document (lists arrive best first)."""
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.id, hit)
    return list(seen.values())


def tune(
    bm25_by_fields: dict[str, list[list[Hit]]],
    knn_lists: list[list[Hit]],
    relevant: list[str],
    saturation: float,
) -> list[dict[str, Any]]:
    """nDCG@10 of each BM25 text view alone and fused over a grid of settings, computed
    offline with the service's own scoring and fusion code."""
    grid: list[dict[str, Any]] = []
    for fields, lists in bm25_by_fields.items():
        alone = [[h.id for h in dedupe(hits)] for hits in lists]
        grid.append(_row("none (bm25)", fields, 0.0, 0.0, scores(alone, relevant)))
        settings = [("linear", w, f) for w in (0.3, 0.4, 0.5, 0.6, 0.7) for f in (0.6, 0.7, 0.8)]
        settings += [("rrf", 0.5, 0.0)]
        for method, weight, floor in settings:
            rankings = []
            for b, v in zip(lists, knn_lists, strict=True):
                bh = dedupe([Hit(h.id, {}, normalize_score(h.score, saturation)) for h in b])
                vh = dedupe([Hit(h.id, {}, vector_score(h.score, floor)) for h in v])
                fused = fuse(bh, vh, method=method, vector_weight=weight)  # type: ignore[arg-type]
                rankings.append([h.id for h in fused])
            grid.append(_row(method, fields, weight, floor, scores(rankings, relevant)))
    return sorted(grid, key=lambda row: row["ndcg@10"], reverse=True)


def _row(
    fusion: str, fields: str, weight: float, floor: float, measured: dict[str, float]
) -> dict[str, Any]:
    return {
        "fusion": fusion,
        "bm25_fields": fields,
        "vector_weight": weight,
        "floor": floor,
        **measured,
    }


def permission_run(
    questions: list[Question],
    paragraphs: dict[str, dict[str, Any]],
    unrestricted: dict[str, list[list[str]]],
    restricted: dict[str, list[list[str]]],
) -> dict[str, Any]:
    """Pre-filter vs the ideal (unrestricted ranking restricted to what the asker may see)
    vs a kNN post-filter, on the questions whose paragraph the asker may see."""

    def visible(doc: str, role: str) -> bool:
        roles = paragraphs[doc]["roles"]
        return not roles or role in roles

    keep = [i for i, q in enumerate(questions) if visible(q.doc, q.role)]
    relevant = [questions[i].doc for i in keep]
    out: dict[str, Any] = {"questions": len(keep)}
    for mode in ("vector", "hybrid"):
        ideal = [[d for d in unrestricted[mode][i] if visible(d, questions[i].role)] for i in keep]
        pre = [restricted[mode][i] for i in keep]
        post = [
            [d for d in unrestricted[mode][i][:10] if visible(d, questions[i].role)] for i in keep
        ]
        out[mode] = {
            "prefilter": scores(pre, relevant),
            "ideal": scores(ideal, relevant),
            "postfilter": scores(post, relevant),
            "prefilter_results_per_query": round(statistics.fmean(min(10, len(r)) for r in pre), 2),
            "postfilter_results_per_query": round(statistics.fmean(len(r) for r in post), 2),
            "leaked": sum(
                1 for i in keep for d in restricted[mode][i] if not visible(d, questions[i].role)
            ),
        }
    return out
