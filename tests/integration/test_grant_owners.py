"""One owner model, every way in (design.md §17), through the CLI as an operator uses it, against
the suite's slapd and a policy database (SQLite and PostgreSQL): role inheritance cannot reach a
role a sync owns, an import is refused an owned role, a renamed sync takes over its old name's
grants, and deleting a row a sync gives is refused like a revoke."""

from __future__ import annotations

import json
from pathlib import Path

import ldap3
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.cli import app
from tests.integration.test_directory_ldap import Tree, cli
from tests.integration.test_directory_ldap import tree as tree  # (the fixture)

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


def roles_of(db: str, user: str) -> set[str]:
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    return set(acl.user_roles(user, "acme"))


def sources_of(db: str, member: str, role: str) -> set[str]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT source FROM grant_source WHERE tenant = 'acme' AND member = :m "
                    "AND role = :r"
                ),
                {"m": member, "r": role},
            )
            return {row[0] for row in rows}
    finally:
        engine.dispose()


def finance_synced(tree: Tree, tmp_path: Path, db: str, *uids: str) -> tuple[Path, str, str]:
    """A sync ``hq`` whose group ``fin`` gives ``finance`` to ``uids``; run once."""
    members = [tree.user(u) for u in uids]
    group = tree.group("fin", *members)
    sync = tree.sync_file(tmp_path, name="hq", roles={"fin": ["finance"]})
    run = cli(db, "sync-ldap", str(sync))
    assert run.exit_code == 0, run.output
    return sync, group, members[-1]


def test_inheritance_cannot_reach_a_role_a_sync_owns(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    sync, _, _ = finance_synced(tree, tmp_path, db, "anna")
    refused = cli(db, "inherit", "contractor", "finance", "--tenant", "acme")
    assert refused.exit_code == 2 and "hq" in refused.output, refused.output
    assert cli(db, "grant-role", "mallory", "contractor", "--tenant", "acme").exit_code == 0
    for _ in range(2):
        assert cli(db, "sync-ldap", str(sync)).exit_code == 0
    assert roles_of(db, "mallory") == {"contractor"}
    assert roles_of(db, "anna") == {"finance"}
    # Another role may inherit nothing owned, and the owned role may inherit what it likes.
    assert cli(db, "inherit", "finance", "reader", "--tenant", "acme").exit_code == 0
    assert roles_of(db, "anna") == {"finance", "reader"}


def test_inheritance_made_before_a_sync_owned_the_role_is_removed_by_the_sync(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    assert cli(db, "inherit", "contractor", "finance", "--tenant", "acme").exit_code == 0
    assert cli(db, "grant-role", "mallory", "contractor", "--tenant", "acme").exit_code == 0
    assert "finance" in roles_of(db, "mallory")
    sync, _, _ = finance_synced(tree, tmp_path, db, "anna")
    assert roles_of(db, "mallory") == {"contractor"}  # (the sync took the path away)
    assert roles_of(db, "anna") == {"finance"}
    again = cli(db, "sync-ldap", str(sync))
    assert again.exit_code == 0 and "removed 0" in again.stdout, again.output


def test_import_is_refused_an_owned_role_and_records_what_it_gives(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    finance_synced(tree, tmp_path, db, "anna")
    exported = cli(db, "export")
    assert exported.exit_code == 0, exported.output
    file = tmp_path / "policy.csv"
    file.write_text(exported.stdout + "g, user:mallory, finance, acme\n", encoding="utf-8")
    refused = cli(db, "import", str(file))
    assert refused.exit_code == 2 and "hq" in refused.output, refused.output
    assert roles_of(db, "mallory") == set()
    # Inheriting it through an import is refused as well.
    file.write_text(exported.stdout + "g, contractor, finance, acme\n", encoding="utf-8")
    assert cli(db, "import", str(file)).exit_code == 2
    # Dropping a line the sync gives is refused too (the sync gives it, and takes it back).
    kept = [line for line in exported.stdout.splitlines() if "user:anna" not in line]
    file.write_text("\n".join(kept) + "\n", encoding="utf-8")
    dropped = cli(db, "import", str(file))
    assert dropped.exit_code == 2 and "ldap:hq" in dropped.output, dropped.output
    assert roles_of(db, "anna") == {"finance"}
    # What an import may give, it gives as the hand's.
    file.write_text(exported.stdout + "g, user:mallory, visitor, acme\n", encoding="utf-8")
    assert cli(db, "import", str(file)).exit_code == 0
    assert roles_of(db, "mallory") == {"visitor"}
    assert sources_of(db, "user:mallory", "visitor") == {"hand"}
    revoked = cli(db, "revoke-role", "mallory", "visitor", "--tenant", "acme")
    assert revoked.exit_code == 0 and roles_of(db, "mallory") == set()
    history = CliRunner().invoke(app, ["audit", "policy", "--db", db, "--json"])
    events = [json.loads(line) for line in history.stdout.splitlines()]
    imported = [e for e in events if e["action"] == "import"]
    assert [(e["source"], e["added"], e["removed"]) for e in imported] == [("cli", 1, 0)]


def test_a_renamed_sync_takes_over_its_old_names_grants(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    sync, group, bob = finance_synced(tree, tmp_path, db, "anna", "bob")
    assert roles_of(db, "bob") == {"finance"}
    tree.conn.modify(group, {"member": [(ldap3.MODIFY_DELETE, [bob])]})
    body = json.loads(sync.read_text(encoding="utf-8"))
    body.update(name="hq-ldap", renamed_from="hq")
    sync.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    for _ in range(2):
        run = cli(db, "sync-ldap", str(sync))
        assert run.exit_code == 0, run.output
    assert roles_of(db, "bob") == set()
    assert roles_of(db, "anna") == {"finance"}
    assert sources_of(db, "user:anna", "finance") == {"ldap:hq-ldap"}
    refused = cli(db, "grant-role", "mallory", "finance", "--tenant", "acme")
    assert refused.exit_code == 2 and "hq-ldap" in refused.output, refused.output


def test_deleting_a_row_a_sync_gives_is_refused_naming_it(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    finance_synced(tree, tmp_path, db, "bob")
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT id FROM casbin_rule WHERE v0 = 'user:bob' AND v1 = 'finance'")
        ).scalar_one()
    engine.dispose()
    refused = cli(db, "delete", str(row))
    assert refused.exit_code == 2 and "ldap:hq" in refused.output, refused.output
    assert roles_of(db, "bob") == {"finance"}
    # A row only the hand gives is deleted, and its source record with it.
    assert cli(db, "grant-role", "mallory", "visitor", "--tenant", "acme").exit_code == 0
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        mine = conn.execute(
            sa.text("SELECT id FROM casbin_rule WHERE v0 = 'user:mallory' AND v1 = 'visitor'")
        ).scalar_one()
    engine.dispose()
    assert cli(db, "delete", str(mine)).exit_code == 0
    assert roles_of(db, "mallory") == set()
    assert sources_of(db, "user:mallory", "visitor") == set()


def test_a_sync_renamed_without_saying_so_names_its_old_name(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    sync, _, _ = finance_synced(tree, tmp_path, db, "anna")
    body = json.loads(sync.read_text(encoding="utf-8"))
    body.update(name="hq-ldap")
    sync.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    for _ in range(2):  # (each run says so, until the file does)
        run = cli(db, "sync-ldap", str(sync))
        assert run.exit_code == 0 and "'renamed_from: hq'" in run.stderr, run.output
    body.update(renamed_from=["hq"])
    sync.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    third = cli(db, "sync-ldap", str(sync))
    assert third.exit_code == 0 and "renamed_from" not in third.output, third.output
    assert sources_of(db, "user:anna", "finance") == {"ldap:hq-ldap"}
