"""The visibility rule (design.md §4) as a truth table, in Python and as Elasticsearch sees it."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_svc.acl import acl_query, chunk_visible, is_visible, stored_roles

OPS, MGR, FIN = "运维工程师", "物业经理", "财务专员"


@pytest.mark.parametrize(
    ("source", "roles", "visible"),
    [
        pytest.param({}, set(), True, id="absent-anonymous"),
        pytest.param({"access_roles": None}, set(), True, id="null-anonymous"),
        pytest.param({"access_roles": []}, set(), True, id="empty-anonymous"),
        pytest.param({}, {OPS}, True, id="absent-with-role"),
        pytest.param({"access_roles": [OPS, MGR]}, set(), False, id="restricted-anonymous"),
        pytest.param({"access_roles": [OPS, MGR]}, {MGR}, True, id="one-shared-role"),
        pytest.param({"access_roles": [OPS, MGR]}, {FIN}, False, id="no-shared-role"),
        pytest.param({"access_roles": [OPS, MGR]}, {FIN, OPS}, True, id="user-many-roles"),
        pytest.param({"access_roles": [None, OPS]}, {OPS}, True, id="null-element-skipped"),
        pytest.param({"access_roles": [None]}, set(), True, id="only-null-elements-public"),
        pytest.param({"access_roles": OPS}, {OPS}, True, id="scalar-string-stored"),
        pytest.param({"access_roles": '["a"]'}, {"a"}, False, id="json-text-is-one-odd-role"),
    ],
)
def test_visibility(source: dict[str, Any], roles: set[str], visible: bool) -> None:
    assert is_visible(stored_roles(source), roles) is visible


def test_anonymous_clause_admits_only_unrestricted() -> None:
    assert acl_query([]) == {
        "bool": {
            "filter": [
                {"bool": {"must_not": [{"exists": {"field": "access_roles"}}]}},
                {"bool": {"must_not": [{"exists": {"field": "access_also"}}]}},
            ]
        }
    }


def test_clause_with_roles_is_public_or_intersection_and_no_denied_role() -> None:
    clause = acl_query({MGR, OPS})
    roles, also = clause["bool"]["filter"]
    should = roles["bool"]["should"]
    assert roles["bool"]["minimum_should_match"] == 1
    assert {"terms": {"access_roles": sorted({MGR, OPS})}} in should
    assert {"terms": {"access_also": sorted({MGR, OPS})}} in also["bool"]["should"]
    assert clause["bool"]["must_not"] == [{"terms": {"access_denied": sorted({MGR, OPS})}}]


@pytest.mark.parametrize(
    ("source", "roles", "visible"),
    [
        pytest.param({"access_roles": [OPS], "access_denied": [FIN]}, {OPS}, True, id="not-denied"),
        pytest.param(
            {"access_roles": [OPS], "access_denied": [FIN]}, {OPS, FIN}, False, id="denied"
        ),
        pytest.param({"access_denied": [FIN]}, set(), True, id="denied-only-anonymous"),
        pytest.param({"access_roles": [OPS], "access_also": [MGR]}, {OPS}, False, id="narrowed"),
        pytest.param({"access_roles": [OPS], "access_also": [MGR]}, {OPS, MGR}, True, id="both"),
        pytest.param({"access_roles": [OPS], "access_also": []}, {OPS}, True, id="also-empty"),
    ],
)
def test_visibility_with_a_second_list_and_denies(
    source: dict[str, Any], roles: set[str], visible: bool
) -> None:
    assert chunk_visible(source, roles) is visible
