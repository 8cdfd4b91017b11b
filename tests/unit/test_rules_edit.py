"""Where a rules edit can change an object's rule (indexer.permissions.changed_below): the
watcher looks only below it, so a key outside it whose rule changed would keep its old roles
until the next re-listing. Held against the whole answer — each key's rule before and after —
over generated files and edits."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.permissions import AclRules, Rule, changed_below

FOLDERS = ["公共", "法务", "人事", "Kontracts", "Gehälter", "a", "ab"]
GLOBS = [f"{f}/**" for f in FOLDERS] + ["公共/d01/**", "公共/*.md", "**/*.xlsx", "*/秘密/**", "a*"]
ROLES = [(), ("法务",), ("人事",), ("财务",)]
KEYS = [
    f"{folder}/{inner}"
    for folder in [*FOLDERS, "K\u212a", "\u212aontracts", "Geha\u0308lter", "abc"]
    for inner in ["x.md", "d01/y.md", "秘密/z.xlsx", "t.xlsx"]
]


def fate(rules: AclRules, key: str) -> object:
    rule = rules.rule_for(key)
    return ("unmatched", rules.unmatched) if rule is None else (rule.roles, rule.override)


def rules_of(said: list[tuple[str, tuple[str, ...], bool]], unmatched: str = "refuse") -> AclRules:
    made = tuple(Rule(i, (g,), r, o) for i, (g, r, o) in enumerate(said, start=1))
    return AclRules("rules.yaml", unmatched, made)  # type: ignore[arg-type]


RULE = st.tuples(st.sampled_from(GLOBS), st.sampled_from(ROLES), st.booleans())


@st.composite
def edits(draw: st.DrawFn) -> tuple[AclRules, AclRules]:
    said = draw(st.lists(RULE, max_size=6))
    edited = list(said)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["add", "remove", "change", "swap", "unmatched"]))
        if how == "add":
            edited.insert(draw(st.integers(0, len(edited))), draw(RULE))
        elif edited and how == "remove":
            edited.pop(draw(st.integers(0, len(edited) - 1)))
        elif edited and how == "change":
            i = draw(st.integers(0, len(edited) - 1))
            edited[i] = (edited[i][0], draw(st.sampled_from(ROLES)), edited[i][2])
        elif len(edited) > 1 and how == "swap":
            i = draw(st.integers(0, len(edited) - 2))
            edited[i], edited[i + 1] = edited[i + 1], edited[i]
    unmatched = draw(st.sampled_from(["refuse", "public"]))
    return rules_of(said), rules_of(edited, unmatched)


@settings(max_examples=400, deadline=None)
@given(edits())
def test_every_key_whose_rule_changed_is_below_what_it_names(
    edit: tuple[AclRules, AclRules],
) -> None:
    before, after = edit
    below = changed_below(before, after)
    for key in KEYS:
        if fate(before, key) != fate(after, key):
            assert below is None or any(key.startswith(p) for p in below), (key, below)


def test_a_folder_s_rule_edited_names_that_folder_alone() -> None:
    said = [("法务/**", ("法务",), False), ("公共/**", (), False)]
    inserted = [
        ("法务/**", ("法务",), False),
        ("公共/d01/**", ("财务",), False),
        ("公共/**", (), False),
    ]
    assert changed_below(rules_of(said), rules_of(inserted)) == ["公共/d01/"]
    roles = [("法务/**", ("法务", "总经理"), False), ("公共/**", (), False)]
    assert changed_below(rules_of(said), rules_of(roles)) == ["法务/"]
    assert changed_below(rules_of(said), rules_of(said)) == []
    both = [*inserted[:1], ("公共/d01/*.md", ("人事",), False), *inserted[1:]]
    assert changed_below(rules_of(said), rules_of(both)) == ["公共/d01/"]  # (inside the other)


def test_every_key_is_looked_at_where_a_prefix_would_not_be_exact() -> None:
    said = [("公共/**", (), False)]
    for glob in ["**/*.xlsx", "*/秘密/**", "Kontracts/**", "Gehälter/**", "Ω/**"]:
        edited = rules_of([(glob, ("法务",), False), *said])
        assert changed_below(rules_of(said), edited) is None, glob
    assert changed_below(rules_of(said), rules_of(said, "public")) is None
    swapped = [("法务/**", ("法务",), False), ("公共/**", (), False)]
    assert changed_below(rules_of(swapped), rules_of(swapped[::-1])) is None
    # (the Kelvin sign's key is Kontracts/… in NFC, where the rules compare it)
    assert rules_of([("Kontracts/**", ("法务",), False)]).rule_for("\u212aontracts/x.md")
    assert unicodedata.normalize("NFD", "Gehälter") != "Gehälter"
