"""The hybrid benchmark's pure parts: generated vectors, exact neighbours, the corpus layout
and the verdicts (issue #25 §1–§2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.hybrid import report as hybrid_report
from bench.hybrid.corpus import ALL, EVERYONE, KNOWLEDGE_BASES, SELECTIVITY, Layout, decorate
from bench.query import vectors


def _real(n: int = 50, dims: int = 16, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=dims)  # anisotropic, as e5's vectors are: one shared direction
    return vectors.unit(centre + 0.3 * rng.normal(size=(n, dims)))


def test_generated_vectors_keep_the_real_sample_and_stay_near_it() -> None:
    real = _real()
    out = vectors.generate(real, 1000, seed=7)
    assert out.shape == (1000, real.shape[1]) and out.dtype == np.float32
    assert np.array_equal(out[:50], real)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    # Each generated vector sits in a real one's cluster: nearer its closest real vector than
    # two real vectors typically are to each other.
    nearest = (out[50:] @ real.T).max(axis=1)
    pairs = real @ real.T
    typical = np.median(pairs[~np.eye(len(real), dtype=bool)])
    assert np.median(nearest) > typical
    assert np.array_equal(out, vectors.generate(real, 1000, seed=7))
    assert not np.array_equal(out, vectors.generate(real, 1000, seed=8))


def test_exact_top_is_brute_force_over_the_given_rows_only() -> None:
    data = vectors.generate(_real(), 500, seed=3)
    rng = np.random.default_rng(4)
    rows = np.sort(rng.choice(500, 120, replace=False))
    queries = vectors.unit(rng.normal(size=(5, data.shape[1])))
    got = vectors.exact_top(data, rows, queries, k=10, block=17)  # many blocks
    for q, top in zip(queries, got, strict=True):
        scores = data[rows] @ q
        want = [int(r) for r in rows[np.argsort(-scores, kind="stable")[:10]]]
        assert top == want
        assert set(top) <= set(rows.tolist())
    assert vectors.exact_top(data, rows[:3], queries[:1], k=10) == [
        [int(r) for r in rows[:3][np.argsort(-(data[rows[:3]] @ queries[0]))]]
    ]


def test_layout_makes_the_promised_shares_visible_and_nests_them() -> None:
    layout = Layout.of(200_000)
    for role, share in SELECTIVITY.items():
        seen = len(layout.visible(role)) / 200_000
        assert abs(seen - share) <= max(0.1 * share, 0.0003), (role, seen)
    assert set(layout.visible("sel1")) <= set(layout.visible("sel10"))
    one_kb = layout.visible(ALL, [KNOWLEDGE_BASES[7]])
    assert abs(len(one_kb) / 200_000 - 1 / len(KNOWLEDGE_BASES)) < 0.005
    assert set(layout.kb[one_kb].tolist()) == {7}


def test_deleted_rows_are_a_seeded_share_and_never_visible() -> None:
    layout = Layout.of(10_000)
    gone = layout.deletions(0.1)
    assert len(gone) == 1000 == len(set(gone.tolist()))
    assert (gone == layout.deletions(0.1)).all() and len(layout.deletions(0)) == 0
    for role in SELECTIVITY:
        left = layout.visible(role, None, gone)
        assert not set(left.tolist()) & set(gone.tolist())
        assert set(left.tolist()) | set(gone.tolist()) >= set(layout.visible(role).tolist())


def test_decorate_keeps_roles_makes_public_chunks_everyones_and_adds_selectivity() -> None:
    layout = Layout.of(1000)
    row = int(layout.visible("sel1")[0])
    public: dict[str, Any] = {"chunk_id": "a", "dataset_name": "x", "access_roles": None}
    decorate(public, row, layout, np.ones(4, dtype=np.float32))
    assert public["access_roles"] == sorted({EVERYONE, ALL, "sel50", "sel10", "sel1"})
    assert public["knowledge_id"] == public["dataset_name"] == KNOWLEDGE_BASES[layout.kb[row]]
    assert public["embedding"] == [1.0, 1.0, 1.0, 1.0]
    hidden_row = int(np.flatnonzero(layout.draw >= 0.5)[0])
    restricted: dict[str, Any] = {"chunk_id": "b", "dataset_name": "x", "access_roles": ["角色001"]}
    decorate(restricted, hidden_row, layout, np.zeros(4, dtype=np.float32))
    assert restricted["access_roles"] == sorted({"角色001", ALL})


def _result(recall_1: float, same: float, repeated: float, errors: int = 0) -> dict[str, Any]:
    row = {"selectivity": "1%", "recall_at_10": recall_1, "errors": errors}
    return {
        "selectivity": [row, {"selectivity": "10%", "recall_at_10": 0.9, "errors": 0}],
        "same_answers": {"hybrid": same, "hybrid_raw_repeated": repeated},
    }


def _gates(result: dict[str, Any]) -> dict[str, bool]:
    return {t["target"][:20]: t["met"] for t in hybrid_report.targets(result) if t["gate"]}


def test_the_smoke_gates_on_recall_at_one_percent_equal_answers_and_errors() -> None:
    ok = _gates(_result(0.96, 1.0, 1.0))
    assert all(ok.values()) and len(ok) == 3  # 10%'s 0.9 is reported, not a gate
    assert not _gates(_result(0.94, 1.0, 1.0))["vector recall@10 vs "]
    assert not _gates(_result(1.0, 0.99, 1.0))["hybrid: service answ"]
    # Where raw itself varies between two sends, the service need only match as often.
    assert _gates(_result(1.0, 0.98, 0.98))["hybrid: service answ"]
    assert not _gates(_result(1.0, 1.0, 1.0, errors=1))["no request failed or"]
