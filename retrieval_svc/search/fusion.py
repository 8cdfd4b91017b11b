"""Hybrid fusion (pure): two ranked lists of hits into one, scored in [0, 1].

Each list arrives with scores already mapped into [0, 1] by a fixed, absolute function
(BM25: ``s / (s + k)``; kNN: cosine rescaled above a floor), so a fused score means the same
thing whatever else is in the result and Dify's ``score_threshold`` keeps its meaning.

* ``linear``: ``w · vector + (1 - w) · bm25``; a hit missing from one list contributes 0
  there (it was not among that list's candidates).
* ``rrf`` (reciprocal rank fusion): ``Σ 1 / (k + rank)`` over the lists, divided by its
  largest possible value ``2 / (k + 1)`` so the top of both lists scores 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

FusionMethod = Literal["linear", "rrf"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One candidate: its id, stored document and normalised score in one list."""

    id: str
    source: dict[str, Any]
    score: float


def vector_score(es_score: float, floor: float) -> float:
    """Elasticsearch's cosine ``_score`` (``(1 + cos) / 2``) as ``[0, 1]`` above ``floor``.

    Multilingual e5 models put unrelated text at cosine ~0.7–0.8, so raw cosine would make
    every passage look relevant; cosines at or below ``floor`` score 0.
    """
    cosine = 2.0 * es_score - 1.0
    if cosine <= floor:
        return 0.0
    return min(1.0, (cosine - floor) / (1.0 - floor))


def fuse(
    bm25: Sequence[Hit],
    vector: Sequence[Hit],
    *,
    method: FusionMethod,
    vector_weight: float,
    rrf_k: int = 60,
) -> list[Hit]:
    """One list, best first; ties keep the order in which hits were first seen."""
    sources: dict[str, dict[str, Any]] = {}
    scores: dict[str, float] = {}
    weights = ((bm25, 1.0 - vector_weight), (vector, vector_weight))
    for hits, weight in weights:
        for rank, hit in enumerate(hits, start=1):
            sources.setdefault(hit.id, hit.source)
            if method == "linear":
                part = weight * hit.score
            else:
                part = 1.0 / (rrf_k + rank)
            scores[hit.id] = scores.get(hit.id, 0.0) + part
    if method == "rrf":
        best = 2.0 / (rrf_k + 1)
        scores = {k: v / best for k, v in scores.items()}
    order = sorted(scores, key=lambda k: scores[k], reverse=True)  # stable: first seen first
    return [Hit(k, sources[k], min(1.0, scores[k])) for k in order]
