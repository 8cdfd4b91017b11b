"""Score mapping and the search body (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_svc.acl import acl_query
from retrieval_svc.search.query import normalize_score, raw_score_floor, search_body


@given(st.floats(min_value=0, max_value=1e6), st.floats(min_value=0.01, max_value=100))
def test_normalized_scores_are_in_unit_interval(raw: float, k: float) -> None:
    assert 0.0 <= normalize_score(raw, k) <= 1.0


@given(
    st.floats(min_value=0.01, max_value=0.99),
    st.floats(min_value=0.1, max_value=100),
)
def test_floor_maps_back_to_threshold(threshold: float, k: float) -> None:
    floor = raw_score_floor(threshold, k)
    assert floor is not None
    assert normalize_score(floor, k) == pytest.approx(threshold)


def test_no_floor_without_threshold() -> None:
    assert raw_score_floor(0.0, 10) is None
    assert raw_score_floor(1.0, 10) == float("inf")


def test_monotone() -> None:
    assert normalize_score(1, 10) < normalize_score(2, 10) < normalize_score(30, 10)
    assert normalize_score(10, 10) == 0.5


def test_body_ands_kb_acl_and_filters() -> None:
    extra = {"term": {"metadata.category": "巡检"}}
    body = search_body(
        query="巡更", tenant="acme", knowledge_ids=["kb"], roles=[], filters=[extra], size=5
    )
    clauses = body["query"]["bool"]["filter"]
    assert {"terms": {"knowledge_id": ["kb"]}} in clauses
    assert {"term": {"tenant": "acme"}} in clauses
    assert extra in clauses
    assert acl_query([]) in clauses  # (the ACL clause of an anonymous caller: public only)
    assert body["size"] == 5
    assert "min_score" not in body
