"""One bad entry is one bad entry (design.md §17), against a real OpenLDAP server and a
SQLite or a real PostgreSQL policy database: a value no store holds (a NUL in one person's
``mail``), a group whose name cannot be a role (``sales `` with its trailing space), ids the
directory equates (``uid=bob`` and ``uid=Bob``: ``(uid=BOB)`` finds both) — each skipped and
named, everyone else synced; and an id read through ``id_attribute: mail`` compared as an
e-mail address, over ``identity resolve``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.cli import app
from tests.integration.test_directory_ldap import Tree, cli, grants

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


@pytest.fixture
def tree(ldap_server: str) -> Iterator[Tree]:
    made = Tree(ldap_server)
    yield made
    made.conn.unbind()


def person(tree: Tree, uid: str, ou: str | None = None, **attributes: object) -> str:
    base = tree.people if ou is None else f"ou={ou},{tree.people}"
    dn = f"uid={uid},{base}"
    tree.conn.add(dn, "inetOrgPerson", {"cn": uid, "sn": uid, **attributes})
    return dn


def test_a_nul_in_one_persons_mail_skips_that_mail_not_the_sync(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    wang = person(tree, "wang", mail="wang@corp.example")
    li = person(tree, "li", mail=["li\x00@corp.example"])
    tree.group("ops", wang, li)
    sync = tree.sync_file(tmp_path, users={"base": tree.people, "aliases": ["mail"]})
    synced = cli(policy_db_url, "sync-ldap", str(sync))
    assert synced.exit_code == 0, synced.output
    assert "'li'" in synced.stderr and "control character" in synced.stderr, synced.stderr
    assert grants(policy_db_url) == {
        "g, user:wang, 运维工程师, acme",
        "g, user:li, 运维工程师, acme",
    }
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    assert acl.identify("WANG@corp.example", "acme").person == "wang"
    assert acl.identify("li", "acme").status == "known"


def test_a_group_named_with_a_trailing_space_gives_no_role_and_stops_nothing(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    wang, li = person(tree, "wang"), person(tree, "li")
    tree.conn.add(f"cn=sales-team,{tree.groups}", "groupOfNames",
                  {"member": [li], "description": "sales "})  # fmt: skip
    tree.conn.add(f"cn=finance-team,{tree.groups}", "groupOfNames",
                  {"member": [wang], "description": "finance"})  # fmt: skip
    groups = {"base": tree.groups, "name_attribute": "description"}
    sync = tree.sync_file(tmp_path, roles={}, all_groups=True, groups=groups)
    synced = cli(policy_db_url, "sync-ldap", str(sync))
    assert synced.exit_code == 0, synced.output
    assert "'sales '" in synced.stderr, synced.stderr
    assert grants(policy_db_url) == {"g, user:wang, finance, acme"}


def test_ids_the_directory_equates_are_refused_as_duplicates(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    for ou in ("staff", "contractors"):
        tree.conn.add(f"ou={ou},{tree.people}", "organizationalUnit")
    staff = person(tree, "bob", "staff")
    contractor = person(tree, "Bob", "contractors")
    tree.conn.search(tree.people, "(uid=BOB)")
    assert len(tree.conn.entries) == 2  # (the directory's own matching rule equates them)
    tree.group("finance", staff)
    synced = cli(policy_db_url, "sync-ldap", str(tree.sync_file(tmp_path)))
    assert synced.exit_code == 0, synced.output
    assert staff.lower() in synced.stderr.lower() and "ou=contractors" in synced.stderr.lower()
    assert grants(policy_db_url) == set()
    del contractor


def test_an_id_read_from_mail_is_compared_as_an_e_mail_address(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    ceo = person(tree, "ceo", mail="ceo@fass.example")
    tree.group("finance", ceo)
    sync = tree.sync_file(tmp_path, users={"base": tree.people, "id_attribute": "mail"})
    assert cli(policy_db_url, "sync-ldap", str(sync)).exit_code == 0
    assert grants(policy_db_url) == {"g, user:ceo@fass.example, 财务专员, acme"}
    fullwidth = "\uff43\uff45\uff4f@fass.example"
    for asked in ("ceo@faß.example", "ceo@FAẞ.example", fullwidth):
        said = CliRunner().invoke(app, ["identity", "--db", policy_db_url, "resolve", asked,
                                        "--tenant", "acme"])  # fmt: skip
        assert said.exit_code == 1, (asked, said.output)  # (no one)
    said = CliRunner().invoke(app, ["identity", "--db", policy_db_url, "resolve",
                                    "CEO@FASS.example", "--tenant", "acme"])  # fmt: skip
    assert said.exit_code == 0, said.output
