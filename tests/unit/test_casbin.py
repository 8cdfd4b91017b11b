"""Casbin roles, hierarchy, knowledge-base permission and hot reload (design.md §4)."""

from __future__ import annotations

import os
from pathlib import Path

import casbin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_svc.acl.casbin_acl import AccessControl, _Compiler
from retrieval_svc.acl.policy_index import PolicyIndex
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyError, PolicyFiles

POLICY = """\
p, anyone, acme, public-*, read
p, 运维工程师, acme, ops-*, read
p, user:carol, acme, private-carol, read
g, user:alice, 物业经理, acme
g, user:bob, 运维工程师, acme
g, 物业经理, 运维工程师, acme
g, 运维工程师, 巡检员, acme
g, user:alice, 财务专员, other
"""


def write_policy(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    # Make sure the change is visible to an mtime check even within one clock tick.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.csv"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
def acl(policy: Path) -> AccessControl:
    return AccessControl(DEFAULT_MODEL, policy, check_interval_s=0)


@pytest.mark.parametrize(
    ("user", "tenant", "roles"),
    [
        pytest.param("alice", "acme", {"物业经理", "运维工程师", "巡检员"}, id="inherits-twice"),
        pytest.param("bob", "acme", {"运维工程师", "巡检员"}, id="inherits-once"),
        pytest.param("alice", "other", {"财务专员"}, id="other-tenant"),
        pytest.param("nobody", "acme", set(), id="unknown-user"),
        pytest.param("物业经理", "acme", set(), id="role-name-as-user-id-gets-nothing"),
    ],
)
def test_user_roles(acl: AccessControl, user: str, tenant: str, roles: set[str]) -> None:
    assert acl.user_roles(user, tenant) == roles


def test_asserted_roles_expand_through_hierarchy(acl: AccessControl) -> None:
    assert acl.expand(["物业经理"], "acme") == {"物业经理", "运维工程师", "巡检员"}
    assert acl.expand(["物业经理"], "other") == {"物业经理"}
    assert acl.expand([], "acme") == frozenset()


@pytest.mark.parametrize(
    ("user", "roles", "kb", "allowed", "by"),
    [
        pytest.param(None, set(), "public-faq", True, "anyone", id="anonymous-public-kb"),
        pytest.param(None, set(), "ops-manual", False, None, id="anonymous-ops-kb"),
        pytest.param(None, {"运维工程师"}, "ops-manual", True, "运维工程师", id="role-grant"),
        pytest.param(
            None, {"巡检员"}, "ops-manual", False, None, id="parent-grant-not-inherited-down"
        ),
        pytest.param("carol", set(), "private-carol", True, "user:carol", id="user-grant"),
        pytest.param("dave", set(), "private-carol", False, None, id="other-user"),
    ],
)
def test_kb_decision(
    acl: AccessControl, user: str | None, roles: set[str], kb: str, allowed: bool, by: str | None
) -> None:
    decision = acl.kb_decision(tenant="acme", user_id=user, roles=roles, knowledge_id=kb)
    assert (decision.allowed, decision.granted_by) == (allowed, by)


def test_default_policy_lets_anyone_read_any_kb() -> None:
    acl = AccessControl()
    assert acl.kb_decision(tenant="t", user_id=None, roles=(), knowledge_id="kb").allowed


def test_policy_change_takes_effect_without_restart(acl: AccessControl, policy: Path) -> None:
    outcomes: list[str] = []
    acl._on_reload = outcomes.append
    assert acl.user_roles("dave", "acme") == set()
    write_policy(policy, POLICY + "g, user:dave, 物业经理, acme\n")
    assert acl.user_roles("dave", "acme") == set()  # requests never load: the watcher does
    assert acl.reload_if_changed() and not acl.reload_if_changed()  # once per change
    assert acl.user_roles("dave", "acme") == {"物业经理", "运维工程师", "巡检员"}
    assert outcomes == ["ok"]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("p, 运维工程师, acme, ops-*\n", id="short-p-line"),
        pytest.param("p, 运维工程师, acme, ops-*, write\n", id="unknown-action"),
        pytest.param("g, user:alice, user:bob, acme\n", id="user-as-role"),
    ],
)
def test_a_line_that_means_nothing_is_skipped_and_the_rest_applies(
    acl: AccessControl, policy: Path, bad: str
) -> None:
    # A bad line beside a revocation: the revocation takes effect (a skipped line is a grant
    # not given), the bad line is reported, nothing else is held back.
    outcomes: list[str] = []
    acl._on_reload = outcomes.append
    write_policy(policy, POLICY.replace("g, user:bob, 运维工程师, acme\n", "") + bad)
    assert acl.reload_if_changed()
    assert acl.user_roles("bob", "acme") == set()
    assert acl.user_roles("alice", "acme") == {"物业经理", "运维工程师", "巡检员"}
    assert outcomes == ["ok"] and acl.last_error is None
    (skipped,) = acl.skipped
    assert skipped.where.endswith("line 8") and skipped.reason


def test_deleted_policy_keeps_the_last_good_one(acl: AccessControl, policy: Path) -> None:
    policy.unlink()
    assert not acl.reload_if_changed()
    assert acl.user_roles("bob", "acme") == {"运维工程师", "巡检员"}
    assert acl.last_error and "does not exist" in acl.last_error


def test_an_unreadable_policy_at_start_is_fatal_a_bad_line_is_not(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        AccessControl(DEFAULT_MODEL, tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"p, \xff\xfe, acme, *, read\n")
    with pytest.raises(PolicyError, match="cannot read"):
        AccessControl(DEFAULT_MODEL, binary)
    bad = tmp_path / "bad.csv"
    bad.write_text("p, a, b\np, anyone, acme, pub, read\n")
    acl = AccessControl(DEFAULT_MODEL, bad)
    assert [s.where for s in acl.skipped] == ["bad.csv line 1"]
    assert acl.kb_decision(tenant="acme", user_id=None, roles=(), knowledge_id="pub").allowed


NAMES = ["r0", "r1", "r2", "r3", "r4"]
USERS = ["user:u0", "user:u1", "user:u2"]
TENANTS = ["acme", "other"]


@settings(max_examples=150)
@given(
    links=st.lists(
        st.tuples(st.sampled_from(NAMES + USERS), st.sampled_from(NAMES), st.sampled_from(TENANTS)),
        max_size=12,
    ),
    grants=st.lists(
        st.tuples(
            st.sampled_from([*NAMES, *USERS, "anyone"]),
            st.sampled_from(["acme", "other", "*"]),
            st.sampled_from(["kb-a", "kb-*", "*", "other-kb"]),
        ),
        max_size=6,
    ),
)
def test_policy_answers_match_pycasbins_own(
    tmp_path_factory: pytest.TempPathFactory,
    links: list[tuple[str, str, str]],
    grants: list[tuple[str, str, str]],
) -> None:
    # The service answers from its own index of the policy (pycasbin's domain role manager is
    # quadratic per call); pycasbin's enforcer on the same files is the oracle.
    path = tmp_path_factory.mktemp("prop") / "policy.csv"
    lines = [f"g, {c}, {p}, {t}" for c, p, t in links if c != p]
    lines += [f"p, {s}, {d}, {o}, read" for s, d, o in grants]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    acl = AccessControl(DEFAULT_MODEL, path)
    oracle = casbin.Enforcer(str(DEFAULT_MODEL), str(path))
    for tenant in TENANTS:
        for user in ("u0", "u1", "u2"):
            want = set(oracle.get_implicit_roles_for_user(f"user:{user}", tenant))
            assert acl.user_roles(user, tenant) == want
            roles = acl.user_roles(user, tenant)
            for kb in ("kb-a", "kb-b", "other-kb"):
                allowed = any(
                    oracle.enforce(s, tenant, kb, "read") for s in ["anyone", f"user:{user}"]
                )
                got = acl.kb_decision(tenant=tenant, user_id=user, roles=roles, knowledge_id=kb)
                assert got.allowed == allowed, (lines, tenant, user, kb)


@pytest.mark.anyio
async def test_the_watcher_compiles_in_a_child_process(acl: AccessControl, policy: Path) -> None:
    # The watcher's path: a spawned child parses and indexes, this process reassembles the
    # pieces. Same answers as a load in this process, errors keep the last good policy.
    outcomes: list[str] = []
    acl._on_reload = outcomes.append
    compiler = _Compiler()
    try:
        assert not await acl.refresh(compiler)  # unchanged: nothing compiled
        write_policy(policy, POLICY + "g, user:dave, 物业经理, acme\n")
        assert await acl.refresh(compiler)
        assert acl.user_roles("dave", "acme") == {"物业经理", "运维工程师", "巡检员"}
        assert compiler._pool is not None
        write_policy(policy, POLICY + "p, 运维工程师, acme, ops-*, write\n")
        assert await acl.refresh(compiler)  # the bad line skipped, dave's grant gone
        assert [s.reason for s in acl.skipped] == ["the only action is 'read'"]
        assert acl.user_roles("dave", "acme") == set()
        policy.unlink()
        assert not await acl.refresh(compiler)  # unreadable: the last policy stays
        assert acl.last_error and "does not exist" in acl.last_error
        assert outcomes == ["ok", "ok", "error"]
    finally:
        compiler.close()


@pytest.mark.anyio
async def test_index_pieces_reassemble_to_the_same_policy(policy: Path) -> None:
    links = [(f"user:u{i}", f"r{i % 7}", "acme") for i in range(25)] + [("r1", "r0", "acme")]
    grants = [("r0", "acme", "kb-*", "read"), ("anyone", "*", "pub", "read")]
    loaded = PolicyIndex.of(grants, links)
    pieces = loaded.pieces(size=4)
    assert len(pieces) == 3 + 7  # the grants, skipped lines, people, then 26 names in fours
    again = await PolicyIndex.assemble(pieces)
    assert (again.parents, again.grants) == (loaded.parents, loaded.grants)
    assert again.implicit("user:u8", "acme") == {"r1", "r0"}


def test_lines_that_mean_nothing_are_refused(tmp_path: Path) -> None:
    # Issue #36 §6: `inherit anyone → exec` and `grant-role eve anyone` were accepted.
    from retrieval_svc.acl.admin import PolicyAdmin
    from retrieval_svc.acl.policy_store import PolicyDatabase

    admin = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}"))
    for change in (
        lambda: admin.inherit("anyone", "exec", "acme"),
        lambda: admin.inherit("exec", "anyone", "acme"),
        lambda: admin.grant_role("eve", "anyone", "acme"),
    ):
        with pytest.raises(PolicyError, match="every principal"):
            change()
    assert admin.rules() == []
    for line in ("g, anyone, exec, acme", "g, user:eve, anyone, acme"):
        path = tmp_path / "policy.csv"
        path.write_text(line + "\n", encoding="utf-8")
        (skipped,) = PolicyFiles(DEFAULT_MODEL, path).rules().skipped
        assert "never a role" in skipped.reason


@pytest.mark.anyio
async def test_the_watcher_starts_its_compiler_before_any_change(acl: AccessControl) -> None:
    # Issue #36 §8: the first revoke after start waited for a child process to spawn and
    # import pycasbin (5-9 s beside busy workers; 0.2 s for every later change).
    import asyncio

    watcher = asyncio.create_task(acl.watch())
    try:
        for _ in range(600):  # (up to a minute on a busy machine; no change is made)
            compiler = acl._compiler
            if compiler is not None and compiler._pool is not None and compiler._pool._processes:
                break
            await asyncio.sleep(0.1)
        assert compiler is not None and compiler._pool is not None
        (child,) = compiler._pool._processes.values()
        assert child.is_alive() and await compiler.warm() == child.pid  # ready, and reused
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
