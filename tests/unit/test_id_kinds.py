"""An id's kind comes from the attribute the sync's configuration reads it from, never from
the key the code stores it under (design.md §17): with ``id_attribute: mail`` a person's own
id is an e-mail address, compared in IDNA2008; duplicates are found with the comparison
lookups use; one bad value from the directory is one skipped, named entry. Through the
sync's own planning and storage (a SQLite policy database) and the resolver the service and
``identity resolve`` use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.id_forms import compared
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.cli import app as svc_cli
from retrieval_svc.directory import Directory, LdapSync, plan
from retrieval_svc.directory.groups import normal_dn
from retrieval_svc.directory.sync_file import id_kinds

FULLWIDTH_CEO = "\uff43\uff45\uff4f@fass.example"  # (fullwidth c, e, o)
# Each look-alike, and what caseIgnoreMatch makes of it.
STORED = {
    "ceo@faß.example": "ceo@fass.example",
    "ceo@FAẞ.example": "ceo@fass.example",
    "oﬃce@corp.example": "office@corp.example",
    FULLWIDTH_CEO: "ceo@fass.example",
}
LOOK_ALIKES = list(STORED)


def sync_config(id_attribute: str, aliases: list[str] | None = None) -> LdapSync:
    return LdapSync.model_validate(
        {
            "tenant": "acme",
            "name": "hq",
            "url": "ldap://directory.invalid",
            "users": {"base": "ou=people,dc=corp", "id_attribute": id_attribute,
                      "aliases": aliases or []},
            "groups": {"base": "ou=groups,dc=corp"},
            "roles": {"board": ["board"]},
        }
    )  # fmt: skip


def read(
    sync: LdapSync, users: dict[str, str], members: dict[str, list[str]], **more: Any
) -> Directory:
    """What ``read_directory`` would return for these entries under ``sync``'s
    configuration: users (DN → id), groups (name → member DNs)."""
    directory = Directory(kinds=id_kinds(sync), **more)
    directory.users = {normal_dn(dn): uid for dn, uid in users.items()}
    for name, dns in members.items():
        group = f"cn={name},ou=groups,dc=corp"
        directory.groups[normal_dn(group)] = name
        for dn in dns:
            directory.add_member(dn, group)
    return directory


def synced(admin: PolicyAdmin, sync: LdapSync, directory: Directory) -> tuple[str, ...]:
    """Apply one sync as ``sync-ldap`` does; what it skipped."""
    changes = plan(directory, sync.role_mapping(), "acme", admin.store.rules().grouping,
                   source="ldap:hq")  # fmt: skip
    admin.sync("sync-ldap", "acme", "hq", changes.changes, changes.owned, detail="test",
               people=changes.identities)  # fmt: skip
    return changes.skipped


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'policy.db'}"


@pytest.fixture
def admin(db: str) -> PolicyAdmin:
    return PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, db))


@pytest.mark.parametrize(
    ("id_attribute", "resolves"),
    [
        # mail: IDNA2008 domains, the local part but for ASCII case: all four are others.
        pytest.param("mail", False, id="mail-email"),
        # userPrincipalName, sAMAccountName: AD's case-insensitive strings, no width,
        # ligature or ß folding — ẞ lowercases to ß, still not ss.
        pytest.param("userPrincipalName", False, id="upn-ad"),
        pytest.param("sAMAccountName", False, id="samaccountname-ad"),
        # uid: OpenLDAP's caseIgnoreMatch (RFC 4518: NFKC, B.2 case folding) equates each
        # with the stored id — the directory itself answers (uid=ceo@faß.example) with it.
        pytest.param("uid", True, id="uid-caseIgnoreMatch"),
    ],
)
def test_each_look_alike_resolves_as_the_configured_attribute_compares(
    admin: PolicyAdmin, db: str, id_attribute: str, resolves: bool
) -> None:
    sync = sync_config(id_attribute)
    people = {"uid=ceo,ou=people,dc=corp": "ceo@fass.example",
              "uid=office,ou=people,dc=corp": "office@corp.example"}  # fmt: skip
    skipped = synced(admin, sync, read(sync, people, {"board": ["uid=ceo,ou=people,dc=corp"]}))
    assert skipped == ()
    acl = AccessControl(source=admin.store)
    assert acl.identify("ceo@fass.example", "acme").status == "known"
    assert acl.user_roles("ceo@fass.example", "acme") == {"board"}
    for asked in LOOK_ALIKES:
        found = acl.identify(asked, "acme")
        if resolves:
            assert (found.status, found.person) == ("alias", STORED[asked]), asked
        else:
            assert (found.status, found.person) == ("unknown", None), asked
        said = CliRunner().invoke(svc_cli, ["identity", "--db", db, "resolve", asked,
                                            "--tenant", "acme"])  # fmt: skip
        assert said.exit_code == (0 if resolves else 1), (asked, said.output)


def test_an_e_mail_alias_keeps_look_alikes_apart_and_one_trailing_dot_is_the_root(
    admin: PolicyAdmin,
) -> None:
    sync = sync_config("uid", aliases=["mail"])
    dn = "uid=ceo,ou=people,dc=corp"
    mail = {dn: {"mail": ["ceo@fass.example"]}}
    synced(admin, sync, read(sync, {dn: "ceo"}, {"board": []}, aliases=mail))
    acl = AccessControl(source=admin.store)
    assert acl.identify("CEO@Fass.Example", "acme").person == "ceo"
    assert acl.identify("ceo@fass.example.", "acme").person == "ceo"  # (the DNS root)
    for asked in [*LOOK_ALIKES, "ceo@fass.example..", "ceo@fass.example..."]:
        assert acl.identify(asked, "acme").status == "unknown", asked


@pytest.mark.parametrize(
    ("id_attribute", "first", "second", "duplicates"),
    [
        pytest.param("uid", "bob", "Bob", True, id="uid-case"),
        pytest.param(
            "uid", "bob", "\uff42\uff4f\uff42", True, id="uid-width"
        ),  # (NFKC: one to slapd)
        pytest.param("sAMAccountName", "bob", "BOB", True, id="ad-case"),
        pytest.param("sAMAccountName", "bob", "\uff42\uff4f\uff42", False, id="ad-width"),
        pytest.param("mail", "bob@corp.example", "Bob@CORP.example", True, id="mail-case"),
        pytest.param("mail", "ceo@fass.example", "ceo@faß.example", False, id="mail-idna"),
    ],
)
def test_ids_the_directory_equates_are_refused_as_duplicates_naming_both(
    admin: PolicyAdmin, id_attribute: str, first: str, second: str, duplicates: bool
) -> None:
    sync = sync_config(id_attribute)
    staff, contractor = "uid=b1,ou=staff,dc=corp", "uid=b2,ou=contractors,dc=corp"
    directory = read(sync, {staff: first, contractor: second}, {"board": [staff]})
    skipped = synced(admin, sync, directory)
    acl = AccessControl(source=admin.store)
    if duplicates:
        (said,) = skipped
        assert staff in said and contractor in said, said
        assert acl.user_roles(first, "acme") == set() == acl.user_roles(second, "acme")
        assert acl.identify(second.upper(), "acme").person is None
    else:
        assert skipped == ()
        assert acl.user_roles(first, "acme") == {"board"}
        assert acl.user_roles(second, "acme") == set()


@pytest.mark.parametrize("bad", ["sales ", " sales", "sa\x00les", "user:sales", "anyone"])
def test_a_group_whose_name_cannot_be_a_role_is_skipped_not_the_sync(
    admin: PolicyAdmin, bad: str
) -> None:
    sync = LdapSync.model_validate({**sync_config("uid").model_dump(), "roles": {},
                                    "all_groups": True})  # fmt: skip
    people = {"uid=ann,ou=people,dc=corp": "ann", "uid=bob,ou=people,dc=corp": "bob"}
    directory = read(sync, people, {"finance": ["uid=ann,ou=people,dc=corp"],
                                    bad: ["uid=bob,ou=people,dc=corp"]})  # fmt: skip
    skipped = synced(admin, sync, directory)
    assert len(skipped) == 1 and repr(bad) in skipped[0], skipped
    acl = AccessControl(source=admin.store)
    assert acl.user_roles("ann", "acme") == {"finance"}
    assert acl.user_roles("bob", "acme") == set()
    assert bad not in admin.owned_roles("acme")


def test_an_id_kind_is_stored_with_the_id(admin: PolicyAdmin) -> None:
    from retrieval_svc.acl import identities

    sync = sync_config("mail", aliases=["userPrincipalName", "employeeNumber"])
    dn = "uid=ceo,ou=people,dc=corp"
    synced(admin, sync, read(sync, {dn: "ceo@fass.example"}, {"board": [dn]},
                             aliases={normal_dn(dn): {"userPrincipalName": ["Ceo@AD.corp"],
                                                      "employeeNumber": ["E-1"]}}))  # fmt: skip
    rows = {(r.attribute, r.kind, r.alias) for r in identities.read_rows(admin.store.engine())}
    assert rows == {
        ("id", "email", compared("email", "ceo@fass.example")),
        ("userPrincipalName", "ad", "ceo@ad.corp"),
        ("employeeNumber", "directory", "e-1"),
    }


def test_rows_stored_before_kinds_read_narrowly_until_the_next_sync(db: str) -> None:
    import sqlalchemy as sa

    from retrieval_svc.acl import identities, tables
    from retrieval_svc.acl.policy_store import TABLE

    engine = sa.create_engine(db)
    tables.ensure_tables(engine, TABLE)  # (the rules, as any policy database has them)
    with engine.begin() as conn:  # (the aliases as they were made before kinds were stored)
        conn.execute(
            sa.text(
                "CREATE TABLE identity_alias (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant "
                "VARCHAR(255) NOT NULL, alias VARCHAR(255) NOT NULL, person VARCHAR(255) NOT NULL, "
                "source VARCHAR(255) NOT NULL, attribute VARCHAR(64) NOT NULL)"
            )
        )
        conn.execute(sa.text(
            "INSERT INTO identity_alias (tenant, alias, person, source, attribute) VALUES "
            "('acme', 'ceo@fass.example', 'ceo@fass.example', 'ldap:hq', 'id'), "
            "('acme', 'li', 'Li', 'scim', 'userName')"))  # fmt: skip
    before = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))  # (a service: reads only)
    assert before.identify("ceo@faß.example", "acme").status == "unknown"
    assert before.identify("LI", "acme").person == "Li"
    admin = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, db))  # (adds the kind column)
    kinds = {(r.person, r.kind) for r in identities.read_rows(engine)}
    assert kinds == {("ceo@fass.example", "exact"), ("Li", "scim")}
    acl = AccessControl(source=admin.store)
    assert acl.identify("ceo@faß.example", "acme").status == "unknown"
    assert acl.identify("LI", "acme").person == "Li"
    sync = sync_config("mail")
    dn = "uid=ceo,ou=people,dc=corp"
    synced(admin, sync, read(sync, {dn: "ceo@fass.example"}, {"board": [dn]}))
    rows = [r for r in identities.read_rows(engine) if r.source == "ldap:hq"]
    assert [(r.alias, r.kind) for r in rows] == [("ceo@fass.example", "email")]
