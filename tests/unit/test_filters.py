"""The filter language (design.md §5) and Dify conditions (§7), without Elasticsearch."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_svc.dify.schemas import MetadataCondition
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters import FieldCatalog, Kind, compile_filter, parse_filter
from retrieval_svc.filters.dify import DIFY_OPERATORS, DifyFilter, translate
from retrieval_svc.filters.tree import MAX_CONDITIONS, MAX_DEPTH
from tests.support import DIFY_DESIGN_OPERATORS

CATALOG = FieldCatalog(
    {
        "metadata.category": Kind.KEYWORD,
        "metadata.year": Kind.NUMBER,
        "metadata.effective_date": Kind.DATE,
        "metadata.draft": Kind.BOOLEAN,
    }
)


def cond(field: str, op: str, value: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"field": field, "op": op}
    if value is not None:
        out["value"] = value
    return out


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = cond("category", "eq", "x")
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def error_path(raw: Any) -> str | None:
    with pytest.raises(InvalidRequest) as err:
        compile_filter(parse_filter(raw), CATALOG)
    assert err.value.status_code == 400 and err.value.error_code == 3001
    assert err.value.message.startswith(err.value.path or "")
    return err.value.path


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param(
            {"or": [cond("category", "eq", "x"), {"and": [cond("year", "bogus", 1)]}]},
            "filter.or[1].and[0].op",
            id="unknown-op",
        ),
        pytest.param(cond("category", "eq"), "filter.value", id="missing-value"),
        pytest.param(cond("category", "exists", "x"), "filter.value", id="value-on-exists"),
        pytest.param(cond("category", "in", []), "filter.value", id="empty-list"),
        pytest.param(cond("category", "in", "x"), "filter.value", id="scalar-for-list"),
        pytest.param(cond("year", "between", [1]), "filter.value", id="between-one-bound"),
        pytest.param({**cond("category", "eq", "x"), "boost": 2}, "filter.boost", id="extra-key"),
        pytest.param({"and": []}, "filter.and", id="empty-and"),
        pytest.param({"and": [5]}, "filter.and[0]", id="not-an-object"),
        pytest.param({"not": [cond("category", "eq", "x")]}, "filter.not", id="not-with-list"),
        pytest.param(cond("category", "eq", {"a": 1}), "filter.value", id="object-value"),
        pytest.param(cond("nope", "eq", "x"), "filter.field", id="unknown-field"),
        pytest.param(cond("year", "prefix", "20"), "filter.op", id="op-not-for-number"),
        pytest.param(cond("content", "eq", "x"), "filter.op", id="eq-on-text"),
        pytest.param(cond("category", "before", "2026-01-01"), "filter.op", id="before-on-keyword"),
        pytest.param(cond("year", "eq", "twenty"), "filter.value", id="not-a-number"),
        pytest.param(cond("year", "in", [2024, "x"]), "filter.value[1]", id="bad-list-item"),
        pytest.param(cond("effective_date", "after", "last week"), "filter.value", id="not-a-date"),
        pytest.param(cond("draft", "eq", "maybe"), "filter.value", id="not-a-boolean"),
        pytest.param(cond("year", "between", [2026, 2020]), "filter.value", id="inverted-bounds"),
        pytest.param(nested(MAX_DEPTH + 1), "filter" + ".not" * MAX_DEPTH, id="too-deep"),
        pytest.param(
            {"or": [cond("category", "eq", str(i)) for i in range(MAX_CONDITIONS + 1)]},
            f"filter.or[{MAX_CONDITIONS}]",
            id="too-many-conditions",
        ),
        pytest.param(cond("category", "in", ["x"] * 1025), "filter.value", id="too-many-values"),
        pytest.param(cond("category", "eq", "x" * 1025), "filter.value", id="string-too-long"),
        pytest.param(
            cond("category", "in", ["ok", "x" * 1025]), "filter.value[1]", id="list-string-too-long"
        ),
    ],
)
def test_errors_name_the_bad_node(raw: Any, path: str) -> None:
    assert error_path(raw) == path


def test_unknown_field_lists_the_known_ones() -> None:
    with pytest.raises(InvalidRequest) as err:
        compile_filter(parse_filter(cond("catgory", "eq", "x")), CATALOG)
    assert "'catgory'" in err.value.message
    for name in ("access_roles", "document_title", "category", "year"):
        assert name in err.value.message


def test_bounds_at_the_limit_are_fine() -> None:
    compile_filter(parse_filter(nested(MAX_DEPTH)), CATALOG)
    compile_filter(parse_filter({"or": [cond("category", "eq", "x")] * MAX_CONDITIONS}), CATALOG)


def test_hostile_depth_is_refused_before_recursion() -> None:
    deep: dict[str, Any] = cond("category", "eq", "x")
    for _ in range(50_000):
        deep = {"not": deep}
    with pytest.raises(InvalidRequest, match="deeper"):
        parse_filter(deep)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            cond("category", "eq", "巡检"), {"term": {"metadata.category": "巡检"}}, id="eq"
        ),
        pytest.param(
            cond("category", "ne", "巡检"),
            {"bool": {"must_not": [{"term": {"metadata.category": "巡检"}}]}},
            id="ne",
        ),
        pytest.param(
            cond("access_roles", "all", ["a", "b"]),
            {
                "bool": {
                    "filter": [{"term": {"access_roles": "a"}}, {"term": {"access_roles": "b"}}]
                }
            },
            id="all",
        ),
        pytest.param(
            cond("category", "contains", "a*b?c\\"),
            {"wildcard": {"metadata.category": {"value": "*a\\*b\\?c\\\\*"}}},
            id="contains-escapes-wildcards",
        ),
        pytest.param(
            cond("category", "suffix", "*"),
            {"wildcard": {"metadata.category": {"value": "*\\*"}}},
            id="suffix",
        ),
        pytest.param(
            cond("content", "contains", "title:x OR y*"),
            {"match_phrase": {"content": "title:x OR y*"}},
            id="text-contains-literal",
        ),
        pytest.param(
            cond("year", "between", ["2020", 2026]),
            {"range": {"metadata.year": {"gte": 2020, "lte": 2026}}},
            id="between-coerces",
        ),
        pytest.param(
            cond("effective_date", "before", 0),
            {"range": {"metadata.effective_date": {"lt": "1970-01-01T00:00:00+00:00"}}},
            id="before-unix-seconds",
        ),
        pytest.param(
            cond("effective_date", "after", "2026-03-01 08:00:00"),
            {"range": {"metadata.effective_date": {"gt": "2026-03-01T08:00:00+00:00"}}},
            id="after-dify-datetime",
        ),
        pytest.param(
            cond("document_title", "eq", "手册"),
            {"term": {"document_title.keyword": "手册"}},
            id="title-exact-on-keyword",
        ),
        pytest.param(
            cond("metadata.category", "missing"),
            {"bool": {"must_not": [{"exists": {"field": "metadata.category"}}]}},
            id="explicit-metadata-prefix",
        ),
        pytest.param(cond("draft", "eq", "true"), {"term": {"metadata.draft": True}}, id="bool"),
    ],
)
def test_compiled_queries(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    assert compile_filter(parse_filter(raw), CATALOG) == expected


def test_query_syntax_in_values_stays_literal() -> None:
    hostile = '*) OR access_roles:* {"match_all":{}}'
    compiled = compile_filter(parse_filter(cond("category", "eq", hostile)), CATALOG)
    assert compiled == {"term": {"metadata.category": hostile}}


# --- Dify metadata_condition -------------------------------------------------------------


def dify(*conditions: dict[str, Any], logical: str | None = "and") -> MetadataCondition:
    return MetadataCondition.model_validate(
        {"logical_operator": logical, "conditions": list(conditions)}
    )


def dc(name: Any, op: str, value: Any = None) -> dict[str, Any]:
    return {"name": name, "comparison_operator": op, "value": value}


@pytest.mark.parametrize(
    ("op", "value", "expected_op", "expected_value"),
    [
        ("contains", "巡", "contains", "巡"),
        ("contains", 15, "contains", "15"),  # Dify compares the value's text
        ("not contains", "巡", "not contains", "巡"),
        ("start with", "巡", "start with", "巡"),
        ("end with", "检", "end with", "检"),
        ("is", "巡检", "is", "巡检"),
        ("is not", "巡检", "is not", "巡检"),
        ("in", ["巡检", "设备"], "in", ("巡检", "设备")),
        ("in", 5, "in", ("5",)),
        ("not in", '["巡检","设备"]', "not in", ("巡检", "设备")),
        ("not in", "", "not in", ()),
        ("empty", None, "empty", None),
        ("not empty", "ignored", "not empty", None),
        ("=", "2024", "is", "2024"),
        ("≠", 5, "is not", 5),
        (">", 5, ">", 5),
        ("<", "5", "<", "5"),
        ("≥", 5.5, "≥", 5.5),
        ("≤", 5, "≤", 5),
        ("before", "2026-01-01", "<", "2026-01-01"),
        ("after", 1767225600, ">", 1767225600),
    ],
)
def test_every_dify_operator(op: str, value: Any, expected_op: str, expected_value: Any) -> None:
    tree, claims = translate(dify(dc("category", op, value)))
    assert isinstance(tree, DifyFilter) and len(tree.leaves) == 1
    leaf = tree.leaves[0]
    assert (leaf.op.value, leaf.value) == (expected_op, expected_value)
    assert leaf.path == "metadata_condition.conditions[0]"
    assert claims.empty


@pytest.mark.parametrize(
    ("op", "value"),
    [
        pytest.param("is", None, id="null"),
        pytest.param("contains", None, id="null-contains"),
        pytest.param(">", None, id="null-compare"),
        pytest.param("is", ["a", "b"], id="list-for-is"),  # Dify's match has no case for it
        pytest.param("is not", {"a": 1}, id="object-for-is-not"),
    ],
)
def test_conditions_dify_ignores_are_dropped(op: str, value: Any) -> None:
    tree, _ = translate(dify(dc("category", op, value)))
    assert tree is None
    tree, _ = translate(dify(dc("category", op, value), dc("year", "=", 1)))
    assert isinstance(tree, DifyFilter) and [leaf.field for leaf in tree.leaves] == ["year"]
    assert tree.leaves[0].path == "metadata_condition.conditions[1]"


def test_operator_table_covers_design() -> None:
    assert set(DIFY_DESIGN_OPERATORS) <= set(DIFY_OPERATORS)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(["巡检", "设备"], id="list"),
        pytest.param('["巡检", "设备"]', id="json-text"),
        pytest.param("['巡检', '设备']", id="python-text"),
        pytest.param("巡检,设备", id="comma-text"),
        pytest.param("巡检， 设备", id="fullwidth-comma"),
    ],
)
def test_list_value_forms(value: Any) -> None:
    tree, _ = translate(dify(dc("category", "in", value)))
    assert isinstance(tree, DifyFilter) and tree.leaves[0].value == ("巡检", "设备")


def test_name_as_one_element_list() -> None:
    tree, _ = translate(dify(dc(["category"], "is", "巡检")))
    assert isinstance(tree, DifyFilter) and tree.leaves[0].field == "category"


def test_logical_operators() -> None:
    both = [dc("category", "is", "a"), dc("year", ">", 1)]
    tree_or, _ = translate(dify(*both, logical="or"))
    tree_and, _ = translate(dify(*both, logical="and"))
    tree_null, _ = translate(dify(*both, logical=None))
    tree_absent, _ = translate(MetadataCondition.model_validate({"conditions": both}))
    assert tree_or is not None and tree_or.any_of
    assert tree_and is not None and not tree_and.any_of
    # Dify joins with `and_ if logical_operator == "and" else or_`: null is OR; absent is its
    # model default, "and".
    assert tree_null is not None and tree_null.any_of
    assert tree_absent is not None and not tree_absent.any_of


@pytest.mark.parametrize(
    ("conditions", "user_id", "roles", "token"),
    [
        pytest.param([dc("user_id", "is", "alice")], "alice", None, None, id="user-id"),
        pytest.param(
            [dc("access_roles", "contains", '["运维工程师","物业经理"]')],
            None,
            ("物业经理", "运维工程师"),
            None,
            id="seed-access-roles-json",
        ),
        pytest.param(
            [dc("user_roles", "in", ["物业经理"])], None, ("物业经理",), None, id="user-roles-list"
        ),
        pytest.param(
            [dc("user_roles", "is", "物业经理,财务专员")],
            None,
            ("物业经理", "财务专员"),
            None,
            id="user-roles-comma",
        ),
        pytest.param(
            [dc("user_roles", "is", "['a', 'b']")],
            None,
            ("a", "b"),
            None,
            id="user-roles-python-text",
        ),
        pytest.param([dc("user_roles", "is", "")], None, (), None, id="no-roles-claimed"),
        pytest.param([dc("principal_token", "is", "t.o.k")], None, None, "t.o.k", id="token"),
    ],
)
def test_identity_conditions_become_claims(
    conditions: list[dict[str, Any]],
    user_id: str | None,
    roles: tuple[str, ...] | None,
    token: str | None,
) -> None:
    tree, claims = translate(dify(*conditions, dc("category", "is", "巡检"), logical="or"))
    assert isinstance(tree, DifyFilter) and [leaf.field for leaf in tree.leaves] == ["category"]
    assert claims.user_id == user_id
    assert (tuple(sorted(claims.roles)) if claims.roles is not None else None) == (
        tuple(sorted(roles)) if roles is not None else None
    )
    assert claims.token == token


@pytest.mark.parametrize(
    ("condition", "path"),
    [
        pytest.param(
            dc("category", "like", "x"),
            "metadata_condition.conditions[0].comparison_operator",
            id="unknown-operator",
        ),
        pytest.param(dc("", "is", "x"), "metadata_condition.conditions[0].name", id="empty-name"),
        pytest.param(
            dc(["a", "b"], "is", "x"), "metadata_condition.conditions[0].name", id="two-names"
        ),
        pytest.param(
            dc("category", "in", '["a",'),
            "metadata_condition.conditions[0].value",
            id="broken-list",
        ),
        pytest.param(
            dc("category", ">", ["a", "b"]),
            "metadata_condition.conditions[0].value",
            id="list-to-compare",
        ),
        pytest.param(
            dc("user_roles", "not contains", "物业经理"),
            "metadata_condition.conditions[0].comparison_operator",
            id="negated-role-claim",
        ),
        pytest.param(
            dc("user_id", "is not", "alice"),
            "metadata_condition.conditions[0].comparison_operator",
            id="negated-user-claim",
        ),
        pytest.param(
            dc("access_roles", "empty"),
            "metadata_condition.conditions[0].comparison_operator",
            id="empty-role-claim",
        ),
        pytest.param(
            dc("principal_token", "≠", "x"),
            "metadata_condition.conditions[0].comparison_operator",
            id="negated-token",
        ),
        pytest.param(
            dc("access_roles", "is", '{"a": 1}'),
            "metadata_condition.conditions[0].value",
            id="unreadable-role-claim",
        ),
    ],
)
def test_dify_errors_name_the_condition(condition: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        translate(dify(condition))
    assert err.value.path == path
