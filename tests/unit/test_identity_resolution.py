"""Who a user id is (design.md §17): the person's own id, any of their other ids compared as
their issuer compares them (``id_forms``), an id two people share resolving to nobody."""

from __future__ import annotations

import unicodedata

import pytest

from retrieval_svc.acl.id_forms import SCIM_KINDS, Kind, attribute_kind, compared
from retrieval_svc.acl.identities import PERSON, Alias, Directory, Unresolved, entries_of


def rows_of(tenant: str, source: str, person: str, ids: dict[str, list[str]]) -> set[Alias]:
    kinds: dict[str, Kind] = (
        {PERSON: "scim", **SCIM_KINDS}
        if source == "scim"
        else {PERSON: "directory", **{a: attribute_kind(a) for a in ids}}
    )
    rows, problems = entries_of(tenant, source, person, ids, kinds)
    assert problems == []
    return rows


ROWS = [
    *rows_of(
        "acme", "ldap:hq", "wang", {"mail": ["Wang.Li@Corp.example"], "upn": ["wang@ad.corp"]}
    ),
    *rows_of("acme", "ldap:hq", "li", {"mail": ["shared@corp.example"]}),
    *rows_of("acme", "ldap:hq", "zhao", {"mail": ["shared@corp.example", "Zhào@corp.example"]}),
    Alias("acme", compared("exact", "0b6e-uuid"), "wang", "map", "map", "exact"),
    *rows_of("globex", "scim", "wang@globex", {"emails": ["wang@globex.example"]}),
]


@pytest.mark.parametrize(
    ("asked", "tenant", "status", "person"),
    [
        pytest.param("wang", "acme", "known", "wang", id="own-id"),
        pytest.param("WANG.LI@corp.EXAMPLE", "acme", "alias", "wang", id="mail-any-case"),
        pytest.param("wang@ad.corp", "acme", "alias", "wang", id="upn"),
        pytest.param("0b6e-uuid", "acme", "alias", "wang", id="mapped-dify-id"),
        pytest.param("0B6E-UUID", "acme", "unknown", None, id="mapped-ids-are-exact"),
        pytest.param(
            unicodedata.normalize("NFD", "zhào@corp.example"), "acme", "alias", "zhao", id="nfd"
        ),
        pytest.param("shared@corp.example", "acme", "ambiguous", None, id="shared-alias"),
        pytest.param("nobody@corp.example", "acme", "unknown", None, id="unknown"),
        pytest.param("wang.li@corp.example", "globex", "unknown", None, id="other-tenant"),
        pytest.param("wang@globex.example", "globex", "alias", "wang@globex", id="scim-email"),
    ],
)
def test_an_id_resolves_to_its_person(
    asked: str, tenant: str, status: str, person: str | None
) -> None:
    found = Directory.of(ROWS).resolve(asked, tenant, granted=False)
    assert (found.status, found.person) == (status, person)
    assert found.unresolved == (status in ("unknown", "ambiguous"))


def test_a_persons_own_id_wins_over_another_persons_alias() -> None:
    rows = [*rows_of("acme", "map", "bob", {}), Alias("acme", "li", "bob", "map", "map", "exact")]
    directory = Directory.of(rows)
    assert directory.resolve("li", "acme", granted=True).person == "li"  # li is in the policy
    assert directory.resolve("li", "acme", granted=False).person == "bob"
    assert directory.resolve(None, "acme", granted=False).status == "none"


def test_the_console_keeps_the_latest_unresolved_ids_bounded() -> None:
    seen = Unresolved(size=2)
    directory = Directory.of(ROWS)
    for asked in ("a", "b", "a", "c"):
        seen.saw("acme", "dify", directory.resolve(asked, "acme", granted=False))
    recent = seen.recent("acme")
    assert [(s.asked, s.count) for s in recent] == [("c", 1), ("a", 2)]
    assert seen.recent("globex") == []
