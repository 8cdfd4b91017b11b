"""Role lists in every form they arrive in (design.md §3, §7)."""

from __future__ import annotations

import pytest

from retrieval_svc.acl import RoleValueError, parse_roles


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, [], id="null"),
        pytest.param("", [], id="empty-text"),
        pytest.param("   ", [], id="blank-text"),
        pytest.param("[]", [], id="empty-json-array"),
        pytest.param([], [], id="empty-list"),
        pytest.param(["运维工程师", "物业经理"], ["运维工程师", "物业经理"], id="list"),
        pytest.param('["运维工程师","物业经理"]', ["运维工程师", "物业经理"], id="json-text"),
        pytest.param("['运维工程师', '物业经理']", ["运维工程师", "物业经理"], id="python-text"),
        pytest.param("运维工程师,物业经理", ["运维工程师", "物业经理"], id="comma-text"),
        pytest.param("运维工程师， 物业经理", ["运维工程师", "物业经理"], id="fullwidth-comma"),
        pytest.param("物业经理", ["物业经理"], id="single-name"),
        pytest.param([" a ", "a", "b"], ["a", "b"], id="trimmed-deduplicated"),
        pytest.param(("x",), ["x"], id="tuple"),
    ],
)
def test_accepted_forms(value: object, expected: list[str]) -> None:
    assert parse_roles(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param('["a", ', id="broken-json"),
        pytest.param('{"roles": ["a"]}', id="json-object"),
        pytest.param("[1, 2]", id="numbers-in-array"),
        pytest.param(["a", None], id="null-element"),
        pytest.param(["a", ""], id="empty-element"),
        pytest.param("a,,b", id="empty-between-commas"),
        pytest.param(42, id="number"),
        pytest.param({"a": 1}, id="mapping"),
        pytest.param('"a"', id="quoted-scalar"),
        pytest.param(["x" * 300], id="too-long"),
        pytest.param('[["a"]]', id="nested-array"),
    ],
)
def test_unreadable_forms_are_errors(value: object) -> None:
    with pytest.raises(RoleValueError):
        parse_roles(value)
