"""Every grant knows its source (design.md §17): two directory syncs mapping one role keep each
other's members; SCIM cannot give a role a directory sync owns, as a hand cannot; a hand revoke
never takes back what a sync gives; a person holds a role while any source gives it. Against
the suite's slapd and a policy database (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ldap3
import pytest
from scim2_models import InvalidValueException
from scim2_server.utils import load_default_provider

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.scim.storage import TenantStorage, ensure_tables
from tests.integration.test_directory_ldap import Tree, cli
from tests.integration.test_directory_ldap import tree as tree  # (the fixture)

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


@pytest.fixture
def other(tree: Tree) -> Iterator[Tree]:
    """A second directory: another branch of the suite's slapd."""
    made = Tree(tree.url)
    yield made
    made.conn.unbind()


def roles_of(db: str, user: str) -> set[str]:
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    return set(acl.user_roles(user, "acme"))


def two_syncs(here: Tree, other: Tree, tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Two directories whose groups both give 财务."""
    wang, li = here.user("wang"), other.user("li")
    here.group("finance-hq", wang)
    other.group("finance-branch", li)
    hq = here.sync_file(tmp_path, name="hq", roles={"finance-hq": ["财务"]})
    branch = other.sync_file(tmp_path, name="branch", roles={"finance-branch": ["财务"]})
    return hq, branch, wang, other.groups


def test_two_directories_mapping_one_role_keep_each_other_s_members(
    tree: Tree,
    other: Tree,
    policy_db_url: str,
    tmp_path: Path,
) -> None:
    db = policy_db_url
    hq, branch, wang, _ = two_syncs(tree, other, tmp_path)
    for sync in (hq, branch, hq, branch):  # (each run, the other's members stay)
        run = cli(db, "sync-ldap", str(sync))
        assert run.exit_code == 0, run.output
        assert "removed 0" in run.stdout, run.stdout
    assert roles_of(db, "wang") == {"财务"} and roles_of(db, "li") == {"财务"}
    # wang leaves the hq group: hq's next run takes its grant back, branch's li keeps hers.
    tree.conn.modify(f"cn=finance-hq,{tree.groups}", {"member": [(ldap3.MODIFY_DELETE, [wang])]})
    run = cli(db, "sync-ldap", str(hq))
    assert run.exit_code == 0 and "removed 1" in run.stdout, run.output
    assert roles_of(db, "wang") == set() and roles_of(db, "li") == {"财务"}


def test_a_person_holds_a_role_while_any_source_gives_it_and_a_hand_revoke_says_who(
    tree: Tree,
    other: Tree,
    policy_db_url: str,
    tmp_path: Path,
) -> None:
    db = policy_db_url
    wang = tree.user("wang")
    wang_there = other.user("wang")  # (the same person in both directories)
    tree.group("finance-hq", wang)
    other.group("finance-branch", wang_there)
    hq = tree.sync_file(tmp_path, name="hq", roles={"finance-hq": ["财务"]})
    branch = other.sync_file(tmp_path, name="branch", roles={"finance-branch": ["财务"]})
    assert cli(db, "sync-ldap", str(hq)).exit_code == 0
    assert cli(db, "sync-ldap", str(branch)).exit_code == 0
    tree.conn.modify(f"cn=finance-hq,{tree.groups}", {"member": [(ldap3.MODIFY_DELETE, [wang])]})
    assert cli(db, "sync-ldap", str(hq)).exit_code == 0
    assert roles_of(db, "wang") == {"财务"}  # (branch still gives it)
    revoked = cli(db, "revoke-role", "wang", "财务", "--tenant", "acme")
    assert revoked.exit_code != 0 and "ldap:branch" in revoked.output, revoked.output
    assert roles_of(db, "wang") == {"财务"}
    refused = cli(db, "grant-role", "zhao", "财务", "--tenant", "acme")
    assert refused.exit_code != 0 and "owned by the directory sync" in refused.output


def test_scim_cannot_give_a_role_a_directory_owns_and_keeps_its_own(
    tree: Tree,
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    wang = tree.user("wang")
    tree.group("finance-hq", wang)
    sync = tree.sync_file(tmp_path, name="hq", roles={"finance-hq": ["财务"]})
    assert cli(db, "sync-ldap", str(sync)).exit_code == 0
    store = PolicyDatabase(DEFAULT_MODEL, db)
    ensure_tables(store.engine())
    provider = load_default_provider()
    types = {rt.name: rt for rt in provider.resource_types}
    user_model, group_model = (provider.model_for(types[n]) for n in ("User", "Group"))
    assert user_model is not None and group_model is not None
    storage = TenantStorage(store.engine(), provider, "acme", lambda: Actor("scim:okta", "scim"))
    zhao = storage.create(types["User"], user_model(user_name="zhao"))
    with pytest.raises(InvalidValueException, match="owned by the directory sync 'hq'"):
        storage.create(
            types["Group"],
            group_model(display_name="财务", members=[{"value": zhao.id, "type": "User"}]),
        )
    assert roles_of(db, "zhao") == set()
    # A role no directory owns: SCIM gives it, and the directory's next sync leaves it.
    storage.create(
        types["Group"],
        group_model(display_name="巡检员", members=[{"value": zhao.id, "type": "User"}]),
    )
    assert cli(db, "sync-ldap", str(sync)).exit_code == 0
    assert roles_of(db, "zhao") == {"巡检员"} and roles_of(db, "wang") == {"财务"}


def test_an_entry_whose_id_cannot_be_stored_never_stops_the_sync(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    long = f"uid=long,{tree.people}"  # (its id: 128 × ß, 256 characters once compared)
    tree.conn.add(long, "inetOrgPerson", {"cn": "long", "sn": "l", "employeeNumber": "ß" * 128})
    wang = f"uid=wang,{tree.people}"
    tree.conn.add(wang, "inetOrgPerson", {"cn": "wang", "sn": "w", "employeeNumber": "wang"})
    group = tree.group("finance-hq", long, wang)
    users = {"base": tree.people, "id_attribute": "employeeNumber"}
    sync = tree.sync_file(tmp_path, name="hq", roles={"finance-hq": ["财务"]}, users=users)
    first = cli(db, "sync-ldap", str(sync))
    assert first.exit_code == 0, first.output
    assert "256 characters" in first.output and "1 entries skipped" in first.stdout
    assert roles_of(db, "wang") == {"财务"} and roles_of(db, "ß" * 128) == {"财务"}
    tree.conn.modify(group, {"member": [(ldap3.MODIFY_DELETE, [wang])]})
    again = cli(db, "sync-ldap", str(sync))  # (a removed member loses the role)
    assert again.exit_code == 0 and "removed 1" in again.stdout, again.output
    assert roles_of(db, "wang") == set()


def test_an_unchanged_directory_is_not_read_again_and_any_change_shows(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_svc.directory import directory_stamp, load_sync
    from tests.integration.test_directory_ldap import ADMIN

    monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
    db = f"sqlite:///{tmp_path / 'p.db'}"
    wang = tree.user("wang")
    group = tree.group("finance-hq", wang)
    sync = tree.sync_file(tmp_path, name="hq", roles={"finance-hq": ["财务"]})
    before = directory_stamp(load_sync(sync))
    assert before is not None and before.startswith("csn:"), before  # (slapd with syncprov)
    run = cli(db, "sync-ldap", str(sync), "--every", "1", "--count", "2")
    assert run.exit_code == 0, run.output
    assert run.stdout.count("synced:") == 1 and "unchanged: the directory's csn" in run.stdout
    assert roles_of(db, "wang") == {"财务"}
    tree.conn.modify(group, {"member": [(ldap3.MODIFY_DELETE, [wang])]})
    assert directory_stamp(load_sync(sync)) != before  # (a membership change moves it)
