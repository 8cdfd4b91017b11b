"""Hybrid retrieval's pure parts: score mapping, fusion, segmentation, the kNN request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_svc.acl import acl_query
from retrieval_svc.search.fusion import Hit, fuse, vector_score
from retrieval_svc.search.query import candidates_for, knn_body, search_body
from retrieval_svc.search.segment import segment


def hits(*pairs: tuple[str, float]) -> list[Hit]:
    return [Hit(i, {"id": i}, s) for i, s in pairs]


def test_linear_fusion_weighs_the_two_lists() -> None:
    bm25 = hits(("a", 0.9), ("b", 0.5))
    vector = hits(("b", 1.0), ("c", 0.8))
    fused = fuse(bm25, vector, method="linear", vector_weight=0.6)
    got = {h.id: round(h.score, 4) for h in fused}
    assert got == {"a": 0.36, "b": 0.8, "c": 0.48}  # 0.4·0.9; 0.4·0.5 + 0.6·1; 0.6·0.8
    assert [h.id for h in fused] == ["b", "c", "a"]


def test_weight_one_is_pure_vector_and_zero_pure_bm25() -> None:
    bm25 = hits(("a", 0.9), ("b", 0.1))
    vector = hits(("b", 0.9), ("a", 0.1))
    assert fuse(bm25, vector, method="linear", vector_weight=1.0)[0].id == "b"
    assert fuse(bm25, vector, method="linear", vector_weight=0.0)[0].id == "a"


def test_rrf_puts_the_top_of_both_lists_at_one() -> None:
    fused = fuse(hits(("a", 0.2)), hits(("a", 0.3)), method="rrf", vector_weight=0.5, rrf_k=60)
    assert fused[0].score == pytest.approx(1.0)
    one_list = fuse(hits(("a", 0.2)), hits(("b", 0.3)), method="rrf", vector_weight=0.5)
    assert [h.score for h in one_list] == [pytest.approx(0.5), pytest.approx(0.5)]


def test_ties_keep_first_seen_order() -> None:
    fused = fuse(hits(("x", 0.5), ("y", 0.5)), [], method="linear", vector_weight=0.5)
    assert [h.id for h in fused] == ["x", "y"]


SCORES = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
LISTS = st.lists(
    st.tuples(st.sampled_from("abcdefgh"), SCORES), max_size=8, unique_by=lambda p: p[0]
)


@given(
    bm25=LISTS,
    vector=LISTS,
    method=st.sampled_from(["linear", "rrf"]),
    weight=st.floats(0.0, 1.0),
)
def test_fused_scores_stay_in_unit_interval_and_sorted(
    bm25: list[tuple[str, float]], vector: list[tuple[str, float]], method: str, weight: float
) -> None:
    fused = fuse(hits(*bm25), hits(*vector), method=method, vector_weight=weight)  # type: ignore[arg-type]
    assert {h.id for h in fused} == {i for i, _ in bm25} | {i for i, _ in vector}
    assert all(0.0 <= h.score <= 1.0 for h in fused)
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)


@pytest.mark.parametrize(
    ("es_score", "floor", "expected"),
    [
        pytest.param(1.0, 0.75, 1.0, id="identical"),
        pytest.param(0.875, 0.75, 0.0, id="at-floor"),  # cosine 0.75
        pytest.param(0.9375, 0.75, 0.5, id="half-way"),  # cosine 0.875
        pytest.param(0.5, 0.75, 0.0, id="orthogonal"),
        pytest.param(0.0, 0.0, 0.0, id="opposite"),
    ],
)
def test_vector_score_rescales_cosine_above_the_floor(
    es_score: float, floor: float, expected: float
) -> None:
    assert vector_score(es_score, floor) == pytest.approx(expected)


def test_segment_cuts_words_and_drops_punctuation() -> None:
    assert segment("电梯维保，怎么办？ABC") == "电梯 维保 怎么办 abc"
    assert segment("。！") == ""


def test_knn_carries_every_restriction_inside_its_filter() -> None:
    caller = {"term": {"metadata.category": "设备"}}
    body = knn_body(
        vector=[0.1, 0.2],
        tenant="acme",
        knowledge_ids=["kb2", "kb1"],
        roles={"r1"},
        filters=[caller],
        k=5,
        num_candidates=3,
    )
    inside = body["knn"]["filter"]["bool"]["filter"]
    assert {"terms": {"knowledge_id": ["kb1", "kb2"]}} in inside
    assert {"term": {"tenant": "acme"}} in inside  # the tenant beside the ACL
    assert acl_query({"r1"}) in inside and caller in inside
    assert "post_filter" not in body and "query" not in body  # a pre-filter, nothing after
    assert body["knn"]["num_candidates"] == 50  # ten candidates per neighbour asked for
    # BM25 is restricted by the same clauses.
    text = search_body(
        query="q",
        tenant="acme",
        knowledge_ids=["kb2", "kb1"],
        roles={"r1"},
        filters=[caller],
        size=5,
    )
    assert text["query"]["bool"]["filter"] == inside


def test_segmented_bm25_queries_the_segmented_field() -> None:
    body = search_body(
        query="电梯维保", tenant="t", knowledge_ids=["kb"], roles=(), size=3, text_fields="both"
    )
    should = body["query"]["bool"]["must"][0]["bool"]["should"]
    assert {"match": {"content_seg": {"query": "电梯 维保"}}} in should
    assert {"match": {"content": {"query": "电梯维保"}}} in should


def test_num_candidates_is_the_setting_or_ten_per_neighbour_within_elasticsearchs_limit() -> None:
    assert candidates_for(10, 500) == 500  # vector mode, top 10: the setting
    assert candidates_for(50, 500) == 500  # hybrid's 50 per list
    assert candidates_for(200, 500) == 2000  # a large top_k keeps ten candidates per hit
    assert candidates_for(5, 3) == 50
    assert candidates_for(5000, 500) == 10_000  # Elasticsearch refuses more
