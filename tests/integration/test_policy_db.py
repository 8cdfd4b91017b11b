"""The Casbin policy in a database: `retrieval-svc policy` commands, change detection and
reload, against SQLite and a real PostgreSQL the suite starts (design.md §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy
from typer.testing import CliRunner

from retrieval_svc.acl.casbin_acl import AccessControl, _Compiler
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.cli import app
from tests.support import make_settings

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

POLICY = """\
p, anyone, acme, building-*, read
p, 财务专员, acme, finance-*, read
g, user:wang, 物业经理, acme
g, 物业经理, 运维工程师, acme
"""


def policy(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["policy", "--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


def rules(url: str) -> set[str]:
    code, out, err = policy(url, "list")
    assert code == 0, err
    return set(out.splitlines())


def test_commands_change_the_policy_and_are_idempotent(policy_db_url: str) -> None:
    steps = [
        ("grant-role", "wang", "物业经理", "--tenant", "acme"),
        ("inherit", "物业经理", "运维工程师", "--tenant", "acme"),
        ("allow", "anyone", "building-*", "--tenant", "acme"),
        ("allow", "user:li", "finance-2026", "--tenant", "acme"),
    ]
    for step in steps:
        code, out, err = policy(policy_db_url, *step)
        assert (code, out.split(":")[0]) == (0, "done"), err
        code, out, _ = policy(policy_db_url, *step)  # the same command again: a no-op
        assert (code, out.split(":")[0]) == (0, "unchanged (already so)")
    assert rules(policy_db_url) == {
        "p, anyone, acme, building-*, read",
        "p, user:li, acme, finance-2026, read",
        "g, user:wang, 物业经理, acme",
        "g, 物业经理, 运维工程师, acme",
    }
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    assert acl.user_roles("wang", "acme") == {"物业经理", "运维工程师"}
    assert acl.kb_decision(tenant="acme", user_id="li", roles=(), knowledge_id="finance-2026")
    for undo in [
        ("revoke-role", "wang", "物业经理", "--tenant", "acme"),
        ("disinherit", "物业经理", "运维工程师", "--tenant", "acme"),
        ("disallow", "user:li", "finance-2026", "--tenant", "acme"),
    ]:
        assert policy(policy_db_url, *undo)[1].startswith("done")
        assert policy(policy_db_url, *undo)[1].startswith("unchanged")
    assert acl.reload_if_changed()
    assert acl.user_roles("wang", "acme") == set()
    assert rules(policy_db_url) == {"p, anyone, acme, building-*, read"}
    code, out, _ = policy(policy_db_url, "list", "--tenant", "other")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(("grant-role", "user:wang", "r"), "without 'user:'", id="user-prefix-on-user"),
        pytest.param(("grant-role", " ", "r"), "user id is empty", id="empty-user"),
        pytest.param(("grant-role", "wang", "user:li"), "is a user, not a role", id="user-as-role"),
        pytest.param(("grant-role", "wang", "a\nb"), "control character", id="line-break"),
        pytest.param(("grant-role", "wang", " r"), "white space", id="padded"),
        pytest.param(
            ("grant-role", "wang", "r", "--tenant", ""), "tenant is empty", id="no-tenant"
        ),
        pytest.param(("inherit", "r", "r"), "cannot inherit itself", id="self-inherit"),
        pytest.param(("allow", "user:", "kb"), "user id is empty", id="empty-user-subject"),
        pytest.param(("allow", "r", "x" * 300), "longer than 255", id="too-long"),
    ],
)
def test_invalid_input_is_refused_and_nothing_changes(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    url = f"sqlite:///{tmp_path / 'policy.db'}"
    code, _, err = policy(url, *args)
    assert code == 2 and says in err, err
    assert rules(url) == set()


def test_import_and_export_round_trip(policy_db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "policy.csv"
    source.write_text(POLICY, encoding="utf-8")
    code, out, err = policy(policy_db_url, "import", str(source))
    assert (code, out.strip()) == (0, f"imported 4 rules from {source}"), err
    code, exported, _ = policy(policy_db_url, "export")
    assert set(exported.splitlines()) == set(POLICY.splitlines())
    # A bad file is refused before anything is written.
    bad = tmp_path / "bad.csv"
    bad.write_text("p, 运维工程师, acme, ops-*, write\n", encoding="utf-8")
    code, _, err = policy(policy_db_url, "import", str(bad))
    assert code == 2 and "only action is 'read'" in err and "unchanged" in err
    assert policy(policy_db_url, "export")[1] == exported
    # Import replaces: a smaller file leaves only its rules.
    source.write_text("p, anyone, *, *, read\n", encoding="utf-8")
    assert policy(policy_db_url, "import", str(source))[0] == 0
    assert rules(policy_db_url) == {"p, anyone, *, *, read"}


@pytest.mark.anyio
async def test_the_watcher_reloads_database_changes(policy_db_url: str) -> None:
    # The service's path: a stamp query notices the change, a child process loads it.
    policy(policy_db_url, "allow", "anyone", "*", "--tenant", "acme")
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    compiler = _Compiler()
    try:
        assert not await acl.refresh(compiler)
        policy(policy_db_url, "grant-role", "zhao", "保洁主管", "--tenant", "acme")
        assert await acl.refresh(compiler)
        assert acl.user_roles("zhao", "acme") == {"保洁主管"}
        # Edited in place with SQL (same row count and ids): still noticed.
        engine = sqlalchemy.create_engine(policy_db_url)
        with engine.begin() as conn:
            conn.execute(
                sqlalchemy.text("UPDATE casbin_rule SET v1 = '运维工程师' WHERE v1 = '保洁主管'")
            )
        engine.dispose()
        assert await acl.refresh(compiler)
        assert acl.user_roles("zhao", "acme") == {"运维工程师"}
        assert not await acl.refresh(compiler)
    finally:
        compiler.close()


@pytest.mark.anyio
async def test_a_role_moved_from_one_person_to_another_is_noticed(policy_db_url: str) -> None:
    # Revoking the newest grant and giving the same role to a name of the same length leaves
    # the row count, the highest id (SQLite reuses a deleted highest rowid) and the total
    # length as they were: the stamp must still move, or the first keeps the role.
    policy(policy_db_url, "allow", "anyone", "*", "--tenant", "acme")
    policy(policy_db_url, "grant-role", "zhao", "财务", "--tenant", "acme")
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    compiler = _Compiler()
    try:
        assert not await acl.refresh(compiler)
        assert acl.user_roles("zhao", "acme") == {"财务"}
        policy(policy_db_url, "revoke-role", "zhao", "财务", "--tenant", "acme")
        policy(policy_db_url, "grant-role", "qian", "财务", "--tenant", "acme")
        assert await acl.refresh(compiler)
        assert acl.user_roles("zhao", "acme") == set()
        assert acl.user_roles("qian", "acme") == {"财务"}
    finally:
        compiler.close()


def test_an_unreachable_database_is_a_clear_error_without_the_password() -> None:
    url = "postgresql+psycopg://rsvc:s3cret-pass@127.0.0.1:1/policy"
    with pytest.raises(PolicyError) as caught:
        PolicyDatabase(DEFAULT_MODEL, url).stamp()
    assert "127.0.0.1:1" in str(caught.value) and "s3cret-pass" not in str(caught.value)
    code, _, err = policy(url, "list")
    assert code == 2 and "policy database" in err and "s3cret-pass" not in err


def test_the_policy_lives_in_one_place(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both set"):
        make_settings("x", casbin_db_url="sqlite:///p.db", casbin_policy=tmp_path / "p.csv")
    assert make_settings("x", casbin_db_url="sqlite:///p.db").casbin_db_url is not None


def test_without_a_database_the_commands_say_how_to_name_one() -> None:
    result = CliRunner().invoke(app, ["policy", "list"], env={"RSVC_CASBIN_DB_URL": ""})
    assert result.exit_code == 2 and "Set RSVC_CASBIN_DB_URL or pass --db" in result.stderr


def test_an_empty_policy_is_said_to_be_empty(policy_db_url: str) -> None:
    code, out, err = policy(policy_db_url, "list")
    assert code == 0 and out == "" and err.strip() == "no rules"
    code, out, err = policy(policy_db_url, "list", "--tenant", "acme")
    assert code == 0 and err.strip() == "no rules in tenant acme"


def test_help_shows_no_markup() -> None:
    result = CliRunner().invoke(app, ["new-key", "--help"], env={"COLUMNS": "200"})
    assert "``" not in result.stdout and "--mode signed" in result.stdout


def history(url: str, *args: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(app, ["audit", "policy", "--db", url, "--json", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_every_change_is_in_the_history_with_its_actor_and_lines(
    policy_db_url: str, tmp_path: Path
) -> None:
    """Issue #35 §4: a change and its record are one transaction; what was already so is not
    recorded; an import is one event per tenant with its counts and every line."""
    assert policy(policy_db_url, "grant-role", "wang", "物业经理", "--tenant", "acme")[0] == 0
    assert policy(policy_db_url, "grant-role", "wang", "物业经理", "--tenant", "acme")[0] == 0
    assert policy(policy_db_url, "allow", "物业经理", "building-*", "--tenant", "acme")[0] == 0
    assert policy(policy_db_url, "revoke-role", "wang", "物业经理", "--tenant", "acme")[0] == 0
    events = history(policy_db_url)
    assert [e["action"] for e in events] == ["revoke-role", "allow", "grant-role"]  # newest first
    assert {e["source"] for e in events} == {"cli"}
    assert all(str(e["actor"]).startswith("cli:") for e in events)
    assert events[2]["changes"] == [
        {"op": "add", "ptype": "g", "subject": "user:wang", "target": "物业经理"}
    ]
    assert [e["action"] for e in history(policy_db_url, "--subject", "user:wang")] == [
        "revoke-role",
        "grant-role",
    ]
    assert history(policy_db_url, "--tenant", "other") == []
    # A bulk change: one event per tenant, its counts, its lines queryable.
    many = "".join(f"g, user:u{i}, 访客, acme\n" for i in range(500)) + POLICY
    file = tmp_path / "import.csv"
    file.write_text(many, encoding="utf-8")
    code, _, err = policy(policy_db_url, "import", str(file))
    assert code == 0, err
    (imported, *_) = history(policy_db_url)
    assert imported["action"] == "import" and imported["detail"] == f"from {file.name}"
    # Before: p 物业经理 building-*. After: POLICY's 4 lines + 500 grants; the old p line goes.
    assert (imported["added"], imported["removed"]) == (504, 1)
    assert len(imported["changes"]) == 505
    assert history(policy_db_url, "--subject", "user:u499")[0]["id"] == imported["id"]
    text = CliRunner().invoke(app, ["audit", "policy", "--db", policy_db_url, "--lines", "2"])
    assert "+504 -1" in text.stdout and "… 503 more (--lines)" in text.stdout, text.stdout


def test_a_change_that_fails_records_nothing(policy_db_url: str) -> None:
    assert policy(policy_db_url, "grant-role", "wang", "user:li", "--tenant", "acme")[0] == 2
    assert history(policy_db_url) == []
    missing = CliRunner().invoke(app, ["audit", "policy"])
    assert missing.exit_code == 2 and "RSVC_CASBIN_DB_URL" in missing.output
