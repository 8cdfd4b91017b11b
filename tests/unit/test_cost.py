"""The cost budget of filters (issue #24 item 5): refused before anything is sent, naming the
costliest condition; what people really filter on fits."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest

from retrieval_svc.dify.schemas import MetadataCondition
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import FieldCatalog, Kind, compile_filter, parse_filter
from retrieval_svc.filters.cost import BUDGET, Cost, query_cost
from retrieval_svc.filters.dify import translate
from retrieval_svc.filters.dify_compiler import compile_dify

CATALOG = FieldCatalog(
    {"metadata.category": Kind.KEYWORD, "metadata.year": Kind.NUMBER, "content": Kind.TEXT}
)


def native(raw: dict[str, Any]) -> dict[str, Any]:
    return compile_filter(parse_filter(raw), CATALOG)


def test_the_reported_attack_is_refused_naming_the_costliest_condition() -> None:
    # Inside the language's bounds: 200 conditions, 400-character values, 300-value lists.
    conditions: list[dict[str, Any]] = [
        {"field": "category", "op": "contains", "value": "x" * 300} for _ in range(150)
    ]
    conditions[7]["value"] = "y" * 400  # the costliest
    conditions += [{"field": "content", "op": "contains", "value": "巡" * 400}]
    conditions += [
        {"field": "category", "op": "in", "value": [f"v{i}" for i in range(300)]} for _ in range(49)
    ]
    with pytest.raises(InvalidRequest, match="too costly") as err:
        native({"or": conditions})
    assert err.value.path == "filter.or[7]"


def test_long_value_lists_are_refused_on_their_own_measure() -> None:
    lists = [{"field": "category", "op": "in", "value": [f"v{i}" for i in range(1000)]}] * 4
    native({"or": lists})  # 4000 terms: fits
    with pytest.raises(InvalidRequest, match="terms in all") as err:
        native({"or": [*lists, {"field": "year", "op": "in", "value": list(range(200))}]})
    assert err.value.path == "filter.or[0]"


def test_what_people_filter_on_fits() -> None:
    everyday = {
        "and": [
            {"field": "category", "op": "in", "value": ["巡检", "设备", "制度"]},
            {"field": "category", "op": "contains", "value": "配电"},
            {"field": "content", "op": "contains", "value": "倒闸操作"},
            {"field": "year", "op": "between", "value": [2020, 2026]},
            {"not": {"field": "category", "op": "prefix", "value": "草稿"}},
        ]
    }
    cost = query_cost(native(everyday))
    assert cost == Cost(pattern_chars=6, terms=7, clauses=5)  # *配电*, 草稿; 3 + 倒闸操作
    assert cost.pattern_chars < BUDGET.pattern_chars


def test_dify_conditions_have_the_same_budget() -> None:
    condition = MetadataCondition.model_validate(
        {
            "logical_operator": "or",
            "conditions": [
                {"name": "category", "comparison_operator": "contains", "value": "z" * 300}
                for _ in range(4)
            ],
        }
    )
    tree, _ = translate(condition)
    assert tree is not None
    with pytest.raises(InvalidRequest, match="too costly") as err:
        compile_dify(tree, CATALOG, UTC)
    assert err.value.path and err.value.path.startswith("metadata_condition.conditions[")
