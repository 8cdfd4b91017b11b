"""Ids compared as their issuer compares them (design.md §17; ``retrieval_svc.acl.id_forms``),
identity decided within the key's tenant, and the map as a file people edit. Against a SQLite
policy database where the policy is involved."""

from __future__ import annotations

import csv
import io
import re
import stringprep
import unicodedata
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.id_forms import KINDS, Kind, compared
from retrieval_svc.acl.identities import PERSON, Alias, Directory, entries_of
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.cli import app as svc_cli

# Which (source, attribute) stores an id of each kind.
STORED_AS: dict[Kind, tuple[str, str]] = {
    "email": ("ldap:hq", "mail"),
    "directory": ("ldap:hq", "employeeNumber"),
    "ad": ("ldap:hq", "userPrincipalName"),
    "scim": ("scim", "userName"),
    "exact": ("map", "map"),
}


def directory_of(kind: Kind, value: str, person: str = "p1") -> Directory:
    source, attribute = STORED_AS[kind]
    rows, problems = entries_of(
        "acme", source, person, {attribute: [value]}, {PERSON: "exact", attribute: kind}
    )
    assert problems == []
    return Directory.of(rows)


def resolves(kind: Kind, stored: str, asked: str) -> bool:
    return directory_of(kind, stored).resolve(asked, "acme", granted=False).person == "p1"


@pytest.mark.parametrize(
    ("kind", "stored", "asked", "same"),
    [
        # Full case folding merged these; their issuers keep them apart.
        pytest.param("email", "ceo@fass.example", "ceo@faß.example", False, id="idna2008-ß"),
        pytest.param("email", "office-lead@corp.example", "oﬃce-lead@corp.example", False,
                     id="ligature-local-part"),
        pytest.param("email", "sam@corp.example", "\u017fam@corp.example", False, id="long-s"),
        pytest.param("scim", "fass", "faß", False, id="scim-ß"),
        pytest.param("exact", "3f6c-uuid", "3F6C-UUID", False, id="map-exact"),
        # The same id to its issuer, spelled another way.
        pytest.param("email", "Wang.Li@Corp.example", "wang.li@CORP.EXAMPLE", True, id="case"),
        pytest.param("email", "ceo@faß.example", "ceo@FAß.example", True, id="idna-case"),
        pytest.param("email", "ceo@xn--fa-hia.example", "ceo@faß.example", True, id="a-label"),
        pytest.param("email", "zhào@corp.example", unicodedata.normalize("NFD", "zhào@corp.ex"),
                     False, id="nfd-other-domain"),
        pytest.param("email", "zhào@corp.ex", unicodedata.normalize("NFD", "zhào@corp.ex"),
                     True, id="nfd"),
        # The Kelvin sign is canonically K (NFC maps it so): one id to any Unicode system.
        pytest.param("email", "kim@corp.example", "\u212aim@corp.example", True, id="kelvin"),
        pytest.param("directory", "E-1001", "e-1001", True, id="caseIgnoreMatch"),
        pytest.param("directory", "Straße", "STRASSE", True, id="caseIgnoreMatch-b2"),
        pytest.param("directory", "Wang  Li", " wang li ", True, id="insignificant-space"),
        pytest.param("scim", "Ärger", "äRGER", True, id="scim-case"),
    ],
)  # fmt: skip
def test_ids_are_the_same_only_where_their_issuer_says(
    kind: Kind, stored: str, asked: str, same: bool
) -> None:
    assert resolves(kind, stored, asked) is same


IDS = st.text(  # (what a store can hold: values with a control character are skipped, below)
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=40
).filter(lambda s: s.strip())


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), value=IDS)
def test_every_id_resolves_to_itself(kind: Kind, value: str) -> None:
    assume(len(compared(kind, value)) <= 255 and compared(kind, value).strip())
    assert resolves(kind, value, value)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), a=IDS, b=IDS)
def test_two_ids_resolve_to_one_person_only_when_their_issuer_equates_them(
    kind: Kind, a: str, b: str
) -> None:
    """Two people, one id each: an id resolves to the first only if the issuer equates it
    with the first's (a reference written apart from the code: what each issuer says)."""
    assume(compared(kind, a).strip() and len(compared(kind, a)) <= 255)
    assume(compared("directory", b) != "p1")  # (the person's own id, not the one tested)
    assert resolves(kind, a, b) == issuer_equates(kind, a, b)


def issuer_equates(kind: Kind, a: str, b: str) -> bool:
    """What the issuing system says, each written from its specification."""
    nfc = lambda s: unicodedata.normalize("NFC", s)  # noqa: E731
    if kind == "exact":
        return nfc(a) == nfc(b)
    if kind in ("scim", "ad"):

        def simple_lower(s: str) -> str:
            return "".join(c.lower() if len(c.lower()) == 1 else c for c in nfc(s).strip())

        return simple_lower(a) == simple_lower(b)
    if kind == "directory":
        import stringprep

        def prep(s: str) -> str:
            mapped = "".join(stringprep.map_table_b2(c) for c in s if not stringprep.in_table_b1(c))
            return " ".join(unicodedata.normalize("NFKC", mapped).split())

        return prep(a) == prep(b)
    return email_key(a) == email_key(b)


def email_key(s: str) -> str:
    import idna

    local, at, domain = s.strip().rpartition("@")
    if not at or not local or not domain:
        return "exact:" + unicodedata.normalize("NFC", s)
    local = "".join(c.lower() if c.isascii() else c for c in unicodedata.normalize("NFC", local))
    try:
        host = idna.encode(domain.removesuffix("."), uts46=True, transitional=False)
        host = host.decode().lower()
    except (idna.IDNAError, UnicodeError):
        host = "".join(
            c.lower() if c.isascii() else c for c in unicodedata.normalize("NFC", domain)
        )
    return f"{local}@{host}"


@settings(max_examples=200, deadline=None)
@given(local=st.from_regex(r"[a-z][a-z0-9.]{0,12}", fullmatch=True), data=st.data())
def test_ascii_case_never_parts_an_address(local: str, data: st.DataObject) -> None:
    asked = "".join(c.upper() if data.draw(st.booleans()) else c for c in local)
    assert resolves("email", f"{local}@corp.example", f"{asked}@CORP.example")


def _rfc4518(value: str) -> str:
    """caseIgnoreMatch's preparation, character by character (RFC 4518 §2: B.1 mapped to
    nothing, B.2 case folding, NFKC, insignificant spaces)."""
    mapped = "".join(stringprep.map_table_b2(c) for c in value if not stringprep.in_table_b1(c))
    return " ".join(unicodedata.normalize("NFKC", mapped).split())


@settings(max_examples=300, deadline=None)
@given(value=st.text(st.characters(max_codepoint=127), max_size=24))
def test_an_ascii_directory_id_is_prepared_as_rfc_4518_says(value: str) -> None:
    # (the ASCII short cut of the directory kind, held to the whole preparation)
    assert compared("directory", value) == _rfc4518(value)
    assert compared("directory", value + "Ä") == _rfc4518(value + "Ä")


def test_an_id_too_long_once_compared_is_skipped_and_named_not_the_rest() -> None:
    rows, problems = entries_of(
        "acme",
        "ldap:hq",
        "ß" * 128,
        {"employeeNumber": ["E-1"], "mail": ["a@corp.example"]},
        {PERSON: "directory", "employeeNumber": "directory", "mail": "email"},
    )
    assert {r.attribute for r in rows} == {"employeeNumber", "mail"}  # (the own id: 256)
    assert len(problems) == 1 and "256 characters" in problems[0]


@pytest.fixture
def admin(tmp_path: Path) -> PolicyAdmin:
    return PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}"))


def test_identity_is_decided_within_the_key_s_tenant(admin: PolicyAdmin) -> None:
    admin.allow("user:zed", "*", "tenant-a")
    admin.allow("user:ceo@fass.example", "*", "tenant-a")
    admin.replace_map("tenant-b", [(2, "ceo@fass.example", "ceo")], "map.csv")
    admin.replace_map("tenant-a", [(2, "dify-1", "wang")], "map.csv")
    acl = AccessControl(source=admin.store)
    assert acl.identify("zed", "tenant-a").status == "known"
    assert acl.identify("zed", "tenant-b").status == "unknown"  # (a grant in A is not B's)
    in_b = acl.identify("ceo@fass.example", "tenant-b")
    assert (in_b.status, in_b.person) == ("alias", "ceo")  # (A's grant does not shadow it)
    assert acl.identify("dify-1", "tenant-b").status == "unknown"  # (A's map is A's)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("id,person\nu-1,wang\n,carol\n", "line 3", id="empty-id"),
        pytest.param("id,person\n,carol\n", "line 2", id="only-an-empty-id"),
        pytest.param("id,person\nu-1,wang\n  ,carol\n", "line 3", id="blank-id"),
        pytest.param("id,person\nu-1,\n", "line 2", id="empty-person"),
        pytest.param("id,person\nu-1,wang\nu-2,li\nu-1,chen\n", "line 4", id="duplicate"),
        pytest.param("id,person\nu-1,wang,extra\n", "line 2", id="three-columns"),
        pytest.param("id,person\n\n# a note\nu-1\n", "line 4", id="one-column"),
        pytest.param("id,person\n" + "x" * 300 + ",wang\n", "line 2", id="too-long"),
    ],
)
def test_a_map_with_any_bad_line_changes_nothing_and_names_the_line(
    tmp_path: Path, text: str, said: str
) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    good = tmp_path / "good.csv"
    good.write_text("id,person\nkeep-me,wang\n", encoding="utf-8")
    assert identity(db, "map", "import", str(good)).exit_code == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(text, encoding="utf-8")
    run = identity(db, "map", "import", str(bad))
    assert run.exit_code == 2, run.output
    assert f"bad.csv {said}" in run.output and "the map is unchanged" in run.output, run.output
    # (and in Chinese, whole: no English sentence left in the line)
    zh = identity(db, "map", "import", str(bad), lang="zh")
    line = said.replace("line ", "第 ") + " 行"
    assert zh.exit_code == 2 and f"bad.csv {line}" in zh.output and "映射未改变" in zh.output
    assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{2,}", zh.output), zh.output
    assert identity(db, "map", "list").stdout == "id,person\nkeep-me,wang\n"


def test_the_map_lists_as_the_csv_it_imports(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    pairs = [("dify,uuid-1", "wang"), ('say "hi"', "li"), ("王芳@例子.公司", "wangfang"),
             ("Ärger", "chen")]  # fmt: skip
    out = io.StringIO()
    csv.writer(out).writerows([("id", "person"), *pairs])
    first = tmp_path / "map.csv"
    first.write_text(out.getvalue(), encoding="utf-8")
    assert identity(db, "map", "import", str(first)).exit_code == 0
    listed = identity(db, "map", "list").stdout
    again = tmp_path / "again.csv"
    again.write_text(listed, encoding="utf-8")
    run = identity(db, "map", "import", str(again))
    assert run.exit_code == 0 and "+0 -0" in run.stdout, run.output
    assert sorted(csv.reader(io.StringIO(listed))) == sorted([["id", "person"], *map(list, pairs)])


def identity(db: str, *args: str, lang: str = "en") -> object:
    """The command as a terminal in ``lang`` runs it (whatever the suite's own locale)."""
    return CliRunner().invoke(svc_cli, ["identity", "--db", db, *args], env={"RSVC_LANG": lang})


def test_policy_error_is_refused_by_the_admin_too(admin: PolicyAdmin) -> None:
    with pytest.raises(PolicyError, match="line 7"):
        admin.replace_map("acme", [(7, "", "carol")], "map.csv")
    assert Alias("t", "a", "p", "map", "map", "exact").kind == "exact"
