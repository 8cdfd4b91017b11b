"""Where a document's roles come from besides the document: folder rules and object tags
(issue #35 §1, §2, §6; design.md §16)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.documents import DocumentError, SourceObject, build_chunks, split_front_matter
from indexer.permissions import (
    AclRules,
    Outside,
    RulesError,
    TagError,
    parse_rules,
    roles_from_tag,
    versioned,
)

RULES = """
unmatched: refuse
rules:
  - match: finance/**
    access_roles: [finance]
  - match: [hr/薪酬/*.xlsx, "hr/薪酬/*.{csv,tsv}"]
    access_roles: 薪酬专员, 人事经理
    override: true
  - match: public/**
    access_roles: []
"""


def outside(rules: AclRules, key: str, tag: tuple[str, ...] | None = None) -> Outside:
    plain = Outside(rules.match(key), rules.path, rules.unmatched, "access_roles", tag)
    return versioned(plain, {})


def chunks(text: str, out: Outside, *layers: dict[str, Any]) -> list[dict[str, Any]]:
    front, body = split_front_matter(text)
    obj = SourceObject(
        uri="s3://b/k",
        identity="s3://b/k",
        name="k.md",
        text=body,
        front_matter=front,
        metadata_layers=layers,
        layer_names=("sidecar",) * len(layers),
        outside=out,
    )
    return build_chunks(obj, knowledge_id="kb", dataset_name="kb")


def test_the_first_matching_rule_gives_the_roles_and_is_named() -> None:
    rules = parse_rules(RULES, "acl-rules.yaml")
    docs = chunks("正文", outside(rules, "finance/2026/预算.md"))
    assert docs[0]["access_roles"] == ["finance"]
    assert docs[0]["metadata"]["access_roles_from"] == "rule (finance/**) of acl-rules.yaml"
    assert docs[0]["permissions_version"]
    assert rules.matched == [1, 0, 0]


def test_globs_stay_in_their_folder_and_match_alternatives() -> None:
    rules = parse_rules(RULES)
    assert rules.match("hr/薪酬/2026.xlsx") is rules.rules[1]
    assert rules.match("hr/薪酬/2026.tsv") is rules.rules[1]
    assert rules.match("hr/薪酬/归档/2026.xlsx") is None  # * stays in one folder
    assert rules.match("finance") is None  # finance/** is what lies inside the folder
    assert rules.match("a/finance/x.md") is None  # anchored at the source's root
    assert rules.match("finance/.hidden/x.md") is rules.rules[0]  # dot folders are folders


def test_a_documents_own_roles_win_over_a_rule_and_a_tag() -> None:
    rules = parse_rules(RULES)
    out = outside(rules, "finance/a.md", tag=("审计",))
    assert chunks("正文", out)[0]["access_roles"] == ["审计"]  # the tag beats the rule
    own = chunks("---\naccess_roles: [董事会]\n---\n正文", out)[0]
    assert own["access_roles"] == ["董事会"]
    assert own["metadata"]["access_roles_from"] == "front matter"
    sidecar = chunks("正文", out, {"access_roles": "法务"})[0]
    assert sidecar["access_roles"] == ["法务"]
    assert sidecar["metadata"]["access_roles_from"] == "sidecar"


def test_an_override_rule_wins_over_the_documents_own_roles() -> None:
    rules = parse_rules(RULES)
    doc = chunks("---\naccess_roles: []\n---\n正文", outside(rules, "hr/薪酬/2026.xlsx"))[0]
    assert doc["access_roles"] == ["薪酬专员", "人事经理"]
    assert "override" in doc["metadata"]["access_roles_from"]


def test_unmatched_refuse_fails_the_document_and_public_says_so() -> None:
    rules = parse_rules(RULES)
    with pytest.raises(DocumentError, match="no rule of rules matches it"):
        chunks("正文", outside(rules, "新部门/计划.md"))
    # Its own roles are enough: it does not go public by accident.
    assert chunks("---\naccess_roles: [x]\n---\n正文", outside(rules, "新部门/a.md"))
    public = parse_rules(RULES.replace("unmatched: refuse", "unmatched: public"), "r.yaml")
    doc = chunks("正文", outside(public, "新部门/计划.md"))[0]
    assert "access_roles" not in doc
    assert doc["metadata"]["access_roles_from"] == "unmatched: public, in r.yaml"


def test_a_rule_saying_public_is_public_and_named() -> None:
    rules = parse_rules(RULES)
    doc = chunks("正文", outside(rules, "public/手册.md"))[0]
    assert "access_roles" not in doc
    assert doc["metadata"]["access_roles_from"].startswith("rule (public/**)")


def test_front_matter_cannot_claim_where_its_roles_came_from() -> None:
    doc = chunks("---\naccess_roles_from: rule 1\n---\n正文", Outside())[0]
    assert "access_roles_from" not in doc["metadata"]  # nothing set roles: public by absence
    assert "permissions_version" not in doc  # (no rules, no tag: as before either existed)


def test_the_version_changes_with_the_rule_and_the_tag_only() -> None:
    rules = parse_rules(RULES)
    a = outside(rules, "finance/a.md").version
    assert a == outside(rules, "finance/b/c.md").version  # the same rule
    assert a != outside(rules, "public/a.md").version
    assert a != outside(rules, "finance/a.md", tag=("x",)).version
    changed = parse_rules(RULES.replace("[finance]", "[finance, audit]"))
    assert a != outside(changed, "finance/a.md").version


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: []", "must say what an object no rule matches gets"),
        ("unmatched: maybe\nrules: []", "unmatched"),
        ("unmatched: refuse\nrules:\n  - match: a/**\n", "access_roles"),
        (
            "unmatched: refuse\nrules:\n  - match: a/**\n    access_roles: [x]\n    roles: [y]",
            "roles",
        ),
        ("unmatched: refuse\nrules:\n  - match: /a/**\n    access_roles: [x]", "leading slash"),
        ("unmatched: refuse\nrules:\n  - match: a\n    access_roles: [user:bob]", "names a user"),
        ("unmatched: refuse\nrules:\n  - match: a\n    access_roles: [anyone]", "every principal"),
        ("unmatched: refuse\nrules:\n  - match: a\n    access_roles: '[\"x\",'", "cannot be read"),
        ("unmatched: refuse\nrules: &r [*r]", "alias"),
        ("unmatched: refuse\nrules:\n - match: [a\n", "not valid YAML"),
        ("- a\n- b", "must be a mapping"),
    ],
)
def test_a_malformed_rules_file_is_refused_with_where_and_why(text: str, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        parse_rules(text)


def test_rules_that_can_never_match_are_warned_of() -> None:
    rules = parse_rules(
        "unmatched: refuse\nrules:\n"
        "  - {match: '**', access_roles: [staff]}\n"
        "  - {match: finance/**, access_roles: [finance]}\n"
        "  - {match: hr/**, access_roles: [hr]}\n"
        "  - {match: hr/薪酬/*.xlsx, access_roles: [pay]}\n"
    )
    assert len(rules.warnings) == 3
    assert "rule 2 (finance/**) can never match: rule 1 (**) comes first" in rules.warnings[0]
    overlap = parse_rules(
        "unmatched: refuse\nrules:\n"
        "  - {match: hr/**, access_roles: [hr]}\n"
        "  - {match: hr/薪酬/*.xlsx, access_roles: [pay]}\n"
    )
    assert "rule 2 (hr/薪酬/*.xlsx) can never match: rule 1 (hr/**)" in overlap.warnings[0]
    overlap.match("hr/a.md")
    assert overlap.summary() == ["rules: rule 2 (hr/薪酬/*.xlsx) matched no object in this run"]


def test_tag_values_are_space_separated_and_checked() -> None:
    assert roles_from_tag("access_roles", "finance  hr-comp 运维工程师 finance") == [
        "finance",
        "hr-comp",
        "运维工程师",
    ]
    assert roles_from_tag("access_roles", "") == []  # said empty: public, as []
    for value, message in [
        ("finance,hr", "separated by spaces"),
        ('["a"]', "separated by spaces"),
        ("user:bob", "names a user"),
        ("anyone", "every principal"),
        ("x" * 257, "over 256"),
    ]:
        with pytest.raises(TagError, match=message):
            roles_from_tag("access_roles", value)


def test_the_fast_matcher_answers_as_wcmatch_does() -> None:
    """The rules are matched through a folder index, substrings and one regex per rule: the
    first rule each key matches must be exactly the first whose wcmatch matcher matches."""
    import random

    from wcmatch import glob

    from indexer.permissions.rules import GLOB_FLAGS

    rng = random.Random(35)
    parts = ["finance", "hr", "薪酬", "a", ".hidden", "2026", "x.md", "y.xlsx", "z.csv"]
    shapes = ["*", "**", "?", "*.md", "{a,hr}", "[fh]*", "*.{csv,xlsx}", *parts]
    patterns = ["/".join(rng.choice(shapes) for _ in range(rng.randint(1, 4))) for _ in range(60)]
    body = "".join(f"  - {{match: {p!r}, access_roles: [r{i}]}}\n" for i, p in enumerate(patterns))
    rules = parse_rules("unmatched: public\nrules:\n" + body)
    matchers = [glob.compile([p], flags=GLOB_FLAGS) for p in patterns]
    keys = ["/".join(rng.choice(parts) for _ in range(rng.randint(1, 5))) for _ in range(3000)]
    for key in keys:
        expected = next((i + 1 for i, m in enumerate(matchers) if m.match(key)), None)
        found = rules.match(key)
        assert (found.number if found else None) == expected, key


def test_names_that_look_alike_match_alike() -> None:
    """``**/`` matches at the root; keys and globs compare in NFC; ``case: insensitive``."""
    import unicodedata

    rules = parse_rules(
        "unmatched: refuse\nrules:\n  - {match: '**/secret-*.md', access_roles: [s]}\n"
        "  - {match: Gehälter/**, access_roles: [hr]}\n  - {match: '**', access_roles: [all]}\n"
    )
    found = {k: rules.match(k) for k in ("secret-root.md", "a/b/secret-x.md", "x/notsecret-a.md")}
    assert {k: r.roles if r else None for k, r in found.items()} == {
        "secret-root.md": ("s",),
        "a/b/secret-x.md": ("s",),
        "x/notsecret-a.md": ("all",),
    }
    decomposed = unicodedata.normalize("NFD", "Gehälter/2026.xlsx")
    assert decomposed != "Gehälter/2026.xlsx" and rules.match(decomposed).roles == ("hr",)  # type: ignore[union-attr]
    assert rules.match("gehälter/2026.xlsx").roles == ("all",)  # type: ignore[union-attr]
    windows = parse_rules(
        "unmatched: refuse\ncase: insensitive\nrules:\n  - {match: Finance/**, access_roles: [f]}\n"
    )
    assert windows.match("FINANCE/Q1.xlsx").roles == ("f",)  # type: ignore[union-attr]
    assert windows.match("hr/Finance/a") is None
    assert (
        windows.fingerprint()
        != parse_rules(
            "unmatched: refuse\nrules:\n  - {match: Finance/**, access_roles: [f]}\n"
        ).fingerprint()
    )  # (switching case changes every document's permissions version)


def test_the_fast_matcher_answers_as_wcmatch_does_without_case() -> None:
    import random

    from wcmatch import glob

    from indexer.permissions.rules import GLOB_FLAGS

    rng = random.Random(46)
    parts = ["Finance", "hr", "HR", "薪酬", "a", "x.MD", "secret-1.md", "Secret-2.md"]
    shapes = ["*", "**", "?", "*.md", "secret-*", "{a,hr}", "[fF]*", *parts]
    patterns = ["/".join(rng.choice(shapes) for _ in range(rng.randint(1, 3))) for _ in range(40)]
    body = "".join(f"  - {{match: {p!r}, access_roles: [r{i}]}}\n" for i, p in enumerate(patterns))
    rules = parse_rules("unmatched: public\ncase: insensitive\nrules:\n" + body)
    flags = GLOB_FLAGS | glob.IGNORECASE
    matchers = [glob.compile([p], flags=flags) for p in patterns]
    keys = ["/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(2000)]
    for key in keys:
        expected = next((i + 1 for i, m in enumerate(matchers) if m.match(key)), None)
        found = rules.match(key)
        assert (found.number if found else None) == expected, key


def test_a_document_names_its_rule_by_its_globs_so_a_rule_moved_by_an_edit_stays_named_right() -> (
    None
):
    """A rule inserted above finance/** moves it from rule 1 to rule 2; a document it set,
    not written again (its roles and text did not change), still names its rule rightly:
    what it records is the same before and after the edit."""
    moved = RULES.replace("rules:\n", "rules:\n  - match: legal/**\n    access_roles: [legal]\n")
    named = []
    for text in (RULES, moved):
        rules = parse_rules(text, "acl-rules.yaml")
        docs = chunks("正文", outside(rules, "finance/2026/预算.md"))
        named.append(docs[0]["metadata"]["access_roles_from"])
    assert named[0] == named[1] == "rule (finance/**) of acl-rules.yaml"
