"""Any name the policy accepts, it holds (design.md §16): every accepted role and user id
round-trips through SQLite, PostgreSQL and CSV export/import verbatim, no stored value is parsed
as syntax, and a stored line that means nothing is skipped alone — reported, deletable — never
taking the rest of the policy, or another tenant's, with it."""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, TABLE, PolicyDatabase, PolicyError
from retrieval_svc.cli import app
from retrieval_svc.names import name_problem

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


def policy(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["policy", "--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


# Names from every Unicode category: letters of every script, marks, digits, punctuation
# (brackets, commas, quotes), symbols, spaces, controls, format characters, surrogates.
NAMES = st.text(
    st.characters(codec=None, exclude_categories=()),  # (surrogates included)
    min_size=0,
    max_size=12,
) | st.sampled_from(["x(", "a]", "eve, admin", 'q"uote', "[人事]", "(财务)", "a\u2028b", "#hash"])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(role=NAMES, user=NAMES)
def test_every_accepted_name_round_trips_through_every_store(
    policy_db_url: str, tmp_path: Path, role: str, user: str
) -> None:
    admin = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    problems = [name_problem("role", role), name_problem("user id", user)]
    if any(problems) or role.startswith("user:") or role == "anyone" or user.startswith("user:"):
        with pytest.raises(PolicyError):
            admin.grant_role(user, role, "acme")
        return
    admin.grant_role(user, role, "acme")
    admin.allow(role, "kb-*", "acme")
    try:
        acl = AccessControl(source=admin.store)  # the policy still loads, every line read
        assert acl.skipped == ()
        assert acl.user_roles(user, "acme") == {role}
        assert acl.kb_decision(
            tenant="acme", user_id=user, roles={role}, knowledge_id="kb-1"
        ).allowed
        # CSV: exported, imported into another database, exported again: the same lines.
        exported = admin.export_csv()
        path = tmp_path / "policy.csv"
        path.write_text(exported, encoding="utf-8")
        other_db = tmp_path / f"{uuid.uuid4().hex}.db"  # (engines are kept per URL)
        other = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{other_db}"))
        other.import_csv(path)
        assert other.export_csv() == exported
        assert set(other.rules()) == set(admin.rules())
        assert AccessControl(DEFAULT_MODEL, path).user_roles(user, "acme") == {role}
        # Revocation always works on what was granted.
        assert admin.revoke_role(user, role, "acme") and admin.disallow(role, "kb-*", "acme")
        assert admin.rules() == []
    finally:
        with admin.store.engine().begin() as conn:  # (the next example starts empty)
            conn.execute(sqlalchemy.text(f"DELETE FROM {TABLE}"))


def test_the_refused_names_are_what_no_store_can_hold() -> None:
    assert name_problem("role", "x(") is None and name_problem("role", "eve, admin") is None
    for bad, says in [
        ("", "empty"),
        ("a\nb", "control character"),
        ("a\x00", "control character"),
        (" a", "white space"),
        ("a\u2029b", "paragraph separator"),
        ("\ud800", "lone surrogate"),
        ("x" * 256, "longer than 255"),
    ]:
        problem = name_problem("role", bad)
        assert problem is not None and says in problem, (bad, problem)
    # Every character of a refused category, anywhere in a name (the check's short cut for
    # printable text must let none through).
    refused = {"Cc", "Cs", "Zl", "Zp"}
    for point in range(0x110000):
        if unicodedata.category(char := chr(point)) in refused:
            assert name_problem("role", f"a{char}b") is not None, hex(point)
    # Every other category is a name: marks, format characters, symbols, private use.
    for char in ("\u0301", "\u200d", "\u20ac", "\ue000", "\u3000x"[1:]):
        assert name_problem("role", "r" + char) is None, unicodedata.name(char, "?")


@pytest.mark.parametrize("name", ["x(", "a]", "eve, admin", "(财务)", 'say "hi"'])
def test_a_name_that_froze_the_policy_is_held_verbatim(policy_db_url: str, name: str) -> None:
    # A role named x( used to stop the policy from loading for every tenant: the running
    # service kept its last good policy, every `policy` command failed, a restart failed.
    for step in (
        ("grant-role", "wang", name, "--tenant", "acme"),
        ("grant-role", name, "经理", "--tenant", "acme"),
        ("grant-role", "li", "经理", "--tenant", "globex"),
    ):
        code, _, err = policy(policy_db_url, *step)
        assert code == 0, err
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    assert acl.user_roles("wang", "acme") == {name}
    assert acl.user_roles(name, "acme") == {"经理"}
    assert acl.user_roles("li", "globex") == {"经理"}
    code, out, _ = policy(policy_db_url, "list", "--tenant", "acme")
    assert code == 0 and len(out.splitlines()) == 2
    assert policy(policy_db_url, "check") == (0, "every stored line is in force\n", "")
    code, _, err = policy(policy_db_url, "revoke-role", "wang", name, "--tenant", "acme")
    assert code == 0, err
    assert acl.reload_if_changed() and acl.user_roles("wang", "acme") == set()


def test_a_stored_line_that_means_nothing_is_skipped_reported_and_deletable(
    policy_db_url: str,
) -> None:
    store = PolicyDatabase(DEFAULT_MODEL, policy_db_url)
    admin = PolicyAdmin(store)
    admin.grant_role("wang", "经理", "acme")
    admin.grant_role("li", "经理", "globex")
    admin.allow("经理", "*", "acme")
    # Rows no way in accepts today, as older versions or a hand-edited database left them.
    rows = [
        {"ptype": "g", "v0": "user:eve", "v1": "admin\nroot", "v2": "acme"},
        {"ptype": "g", "v0": "user:eve", "v1": "admin"},  # (no tenant)
        {"ptype": "p", "v0": "anyone", "v1": "acme*", "v2": "*", "v3": "read"},
        {"ptype": "x", "v0": "whatever"},
    ]
    with store.engine().begin() as conn:
        table = sqlalchemy.table(TABLE, *(sqlalchemy.column(c) for c in rows[0] | {"v3": ""}))
        for row in rows:
            conn.execute(sqlalchemy.insert(table).values(**row))
    acl = AccessControl(source=store)  # the service starts with them present
    assert len(acl.skipped) == 4
    assert acl.user_roles("wang", "acme") == {"经理"} and acl.user_roles("li", "globex") == {"经理"}
    assert acl.user_roles("eve", "acme") == set()  # a grant not read is a grant not given
    assert not acl.kb_decision(tenant="acme", user_id=None, roles=(), knowledge_id="k").allowed
    code, out, err = policy(policy_db_url, "check")
    assert code == 1 and "4 stored lines skipped" in err
    assert "control character" in out and "a g line must be" in out and "unknown line type" in out
    # Each can be deleted by its row id; the deletion is in the history.
    for skipped in acl.skipped:
        code, out, err = policy(policy_db_url, "delete", str(skipped.row_id))
        assert code == 0 and out.startswith(f"deleted row {skipped.row_id}"), err
    assert policy(policy_db_url, "delete", "99999")[0] == 2
    assert policy(policy_db_url, "check")[0] == 0
    assert acl.reload_if_changed() and acl.skipped == ()
    events = store.history(since=datetime(2000, 1, 1, tzinfo=UTC))
    assert sum(e.action == "delete" for e in events) == 4
    # The rules still in force are untouched.
    assert acl.user_roles("wang", "acme") == {"经理"}
