"""Vectors for the hybrid benchmark: a real sample from the bundled model, the rest generated
from it, and numpy's exact nearest neighbours (issue #25 §1).

Embedding a million chunks with the bundled model on two cores takes most of a day, so the
first ``real`` chunks (10,000 by default) are embedded for real and cached, and every later
chunk's vector is generated from them, seeded by the corpus size:

    v = normalize(R[j] + s · (R[a] - R[b]))     j, a, b uniform over the real sample,
                                                s uniform in [0.15, 0.45]

The step along the difference of two real vectors keeps ``v`` in the subspace the model's
vectors actually occupy (e5's vectors are far from isotropic: two unrelated passages of this
corpus still have cosine ≈ 0.8), and each real vector becomes the centre of a cluster of
generated ones, as real corpora have clusters of near-duplicates and topics. ``python -m
bench.hybrid --check-generated`` compares recall and latency on the real sample with a
generated set of the same size.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval_svc.embedding.local import LocalEmbedder
from retrieval_svc.words import say

STEP = (0.15, 0.45)


async def embed(texts: Sequence[str], cache: Path, *, queries: bool = False) -> np.ndarray:
    """The bundled model's vectors for ``texts``, cached under ``cache`` by their hash.

    Passages are embedded in batches and scaled to unit length. Queries are embedded one at a
    time and kept exactly as the model gives them, as the service embeds a query: the raw
    side must send Elasticsearch the very vector the service sends (a batch pads its texts,
    which moves the last bits, and a near-tie can then rank the other way).
    """
    digest = hashlib.sha256(("\x00".join(texts) + f"|q={queries}").encode()).hexdigest()[:16]
    path = cache / f"vectors-{'q1' if queries else 'p'}-{len(texts)}-{digest}.npy"
    if path.exists():
        out: np.ndarray = np.load(path)
        return out
    model = LocalEmbedder(batch_size=32)
    rows: list[list[float]] = []
    started = time.perf_counter()
    step = 1 if queries else 256
    for i in range(0, len(texts), step):
        part = texts[i : i + step]
        rows += await (model.embed_queries(part) if queries else model.embed_passages(part))
        if len(rows) % 256 == 0 or len(rows) == len(texts):
            rate = len(rows) / (time.perf_counter() - started)
            said = say(
                "bench_embedded", done=f"{len(rows):,}", total=f"{len(texts):,}", rate=f"{rate:.0f}"
            )
            print(said, file=sys.stderr)
    matrix = np.asarray(rows, dtype=np.float32)
    out = matrix if queries else unit(matrix)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def unit(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: np.ndarray = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


def generate(real: np.ndarray, total: int, seed: int) -> np.ndarray:
    """``total`` unit vectors: ``real`` first, then generated from it (module docstring)."""
    n, dims = real.shape
    out = np.empty((total, dims), dtype=np.float32)
    head = min(n, total)
    out[:head] = real[:head]
    rng = np.random.default_rng(seed)
    block = 100_000
    for start in range(head, total, block):
        size = min(block, total - start)
        j, a, b = (rng.integers(0, n, size) for _ in range(3))
        step = rng.uniform(*STEP, size).astype(np.float32)[:, None]
        out[start : start + size] = unit(real[j] + step * (real[a] - real[b]))
    return out


def exact_top(
    vectors: np.ndarray, rows: np.ndarray, queries: np.ndarray, k: int = 10, block: int = 200_000
) -> list[list[int]]:
    """For each query, the ``k`` rows (indices into ``vectors``) among ``rows`` with the
    highest cosine, best first: brute force, the reference for recall."""
    out: list[list[int]] = []
    for q in queries:
        best_scores = np.empty(0, dtype=np.float32)
        best_rows = np.empty(0, dtype=np.int64)
        for start in range(0, len(rows), block):
            part = rows[start : start + block]
            scores = vectors[part] @ q
            keep = min(k, len(part))
            top = np.argpartition(-scores, keep - 1)[:keep]
            best_scores = np.concatenate([best_scores, scores[top]])
            best_rows = np.concatenate([best_rows, part[top]])
        order = np.argsort(-best_scores, kind="stable")[:k]
        out.append([int(r) for r in best_rows[order]])
    return out
