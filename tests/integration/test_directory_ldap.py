"""Directory groups by LDAP sync (issue #35 §3, §6) against a real OpenLDAP server the suite
starts (Debian's slapd): users and groups read with paged searches, nested groups expanded,
the difference applied in one transaction and recorded; a user moved between groups; a
directory that goes away mid-sync changes nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ldap3
import pytest
from typer.testing import CliRunner

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.cli import app
from retrieval_svc.directory import DirectoryError, load_sync, read_directory
from tests.support import SERVERS_DIR
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

ADMIN = ("cn=admin,dc=example,dc=org", "admin")


class Tree:
    """One test's own branch of the directory (ou=<random> under people and groups)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ou = f"t{uuid.uuid4().hex[:8]}"
        self.conn = ldap3.Connection(url, *ADMIN, auto_bind=True, raise_exceptions=True)
        for parent in ("people", "groups"):
            self.conn.add(f"ou={self.ou},ou={parent},dc=example,dc=org", "organizationalUnit")

    @property
    def people(self) -> str:
        return f"ou={self.ou},ou=people,dc=example,dc=org"

    @property
    def groups(self) -> str:
        return f"ou={self.ou},ou=groups,dc=example,dc=org"

    def user(self, uid: str) -> str:
        dn = f"uid={uid},{self.people}"
        self.conn.add(dn, "inetOrgPerson", {"cn": uid, "sn": uid})
        return dn

    def group(self, cn: str, *members: str) -> str:
        dn = f"cn={cn},{self.groups}"
        self.conn.add(dn, "groupOfNames", {"member": [ADMIN[0], *members]})  # (never empty)
        return dn

    def move(self, member: str, out_of: str, into: str) -> None:
        self.conn.modify(out_of, {"member": [(ldap3.MODIFY_DELETE, [member])]})
        self.conn.modify(into, {"member": [(ldap3.MODIFY_ADD, [member])]})

    def sync_file(self, folder: Path, url: str | None = None, **more: Any) -> Path:
        body = {
            "tenant": "acme",
            "url": url or self.url,
            "bind_dn": ADMIN[0],
            "bind_password_env": "TEST_LDAP_PASSWORD",
            "users": {"base": self.people},
            "groups": {"base": self.groups},
            "page_size": 3,  # several pages even for a handful of entries
            "roles": {"ops": ["运维工程师"], f"cn=finance,{self.groups}": ["财务专员"]},
            **more,
        }
        path = folder / f"sync-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")  # (JSON is YAML)
        return path


@pytest.fixture
def tree(ldap_server: str) -> Iterator[Tree]:
    made = Tree(ldap_server)
    yield made
    made.conn.unbind()


def cli(db: str, *args: str) -> Any:
    return CliRunner().invoke(
        app, ["policy", "--db", db, *args], env={"TEST_LDAP_PASSWORD": ADMIN[1]}
    )


def grants(db: str) -> set[str]:
    out = cli(db, "list", "--tenant", "acme").stdout
    return {line for line in out.splitlines() if line.startswith(("g, user:", 'g, "user:'))}


def test_groups_become_roles_nested_moved_and_recorded(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    wang, li, zhao, chen = (tree.user(u) for u in ("wang", "li", "zhao", "chen"))
    leads = tree.group("leads", li)
    ops = tree.group("ops", wang, leads)  # li is in ops through leads
    finance = tree.group("finance", zhao)
    tree.group("misc", chen)  # mapped to nothing: gives nothing
    # By hand: zhao holds 运维工程师 (a role the directory owns: it goes) and 访客 (it stays).
    assert cli(db, "grant-role", "zhao", "运维工程师", "--tenant", "acme").exit_code == 0
    assert cli(db, "grant-role", "zhao", "访客", "--tenant", "acme").exit_code == 0
    sync = tree.sync_file(tmp_path)
    dry = cli(db, "sync-ldap", str(sync), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert (
        "would add 3, remove 1" in dry.stdout and "- g, user:zhao, 运维工程师, acme" in dry.stdout
    )
    assert len(grants(db)) == 2  # a dry run changes nothing
    first = cli(db, "sync-ldap", str(sync))
    assert first.exit_code == 0, first.output
    assert grants(db) == {
        "g, user:wang, 运维工程师, acme",
        "g, user:li, 运维工程师, acme",  # through the nested group
        "g, user:zhao, 财务专员, acme",
        "g, user:zhao, 访客, acme",  # not the directory's role: untouched
    }
    assert cli(db, "sync-ldap", str(sync)).stdout.startswith("synced: added 0, removed 0")
    # li moves from leads to finance: the next sync takes 运维工程师 away and gives 财务专员.
    tree.move(li, leads, finance)
    moved = cli(db, "sync-ldap", str(sync))
    assert moved.exit_code == 0 and "added 1, removed 1" in moved.stdout, moved.output
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert acl.user_roles("li", "acme") == {"财务专员"}
    assert acl.user_roles("wang", "acme") == {"运维工程师"}
    history = CliRunner().invoke(app, ["audit", "policy", "--db", db, "--json"])
    events = [json.loads(line) for line in history.stdout.splitlines()]
    synced = [e for e in events if e["source"] == "ldap"]
    assert [(e["actor"], e["added"], e["removed"]) for e in synced] == [
        ("sync-ldap", 1, 1),
        ("sync-ldap", 3, 1),
    ]
    assert "4 users, 4 groups from ldap://" in synced[0]["detail"]
    assert {"op": "remove", "ptype": "g", "subject": "user:li", "target": "运维工程师"} in synced[
        0
    ]["changes"]
    del ops


def test_a_group_named_like_a_user_or_anyone_is_refused(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    wang, li = tree.user("wang"), tree.user("li")
    tree.group("ops", li)
    for name in ("user:boss", "anyone"):
        group = tree.group(name, wang)
        sync = tree.sync_file(tmp_path, roles={}, all_groups=True)
        refused = cli(policy_db_url, "sync-ldap", str(sync))  # (that group, not the sync)
        assert refused.exit_code == 0, refused.output
        assert f"group {name!r}" in refused.stderr and "rename it" in refused.stderr
        assert grants(policy_db_url) == {"g, user:li, ops, acme"}
        tree.conn.delete(group)
    mapped = tree.sync_file(tmp_path, roles={"ops": ["user:wang"]})
    bad = cli(policy_db_url, "sync-ldap", str(mapped))
    assert bad.exit_code == 2 and "is a user, not a role" in bad.output, bad.output


def test_a_directory_that_goes_away_mid_sync_changes_nothing(
    tree: Tree,
    policy_db_url: str,
    tmp_path: Path,
    ldap_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    people = [tree.user(f"u{i:03d}") for i in range(120)]
    tree.group("ops", *people)
    sync = tree.sync_file(tmp_path)
    assert cli(policy_db_url, "sync-ldap", str(sync)).exit_code == 0
    before = grants(policy_db_url)
    assert len(before) == 120
    with TcpProxy(ldap_server.replace("ldap://", "http://")) as proxy:
        proxy.delay_s = 0.02  # every answer held back a little: the sync takes seconds
        through = tree.sync_file(tmp_path, url=f"ldap://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
        failed: list[BaseException] = []

        def read() -> None:
            try:
                read_directory(load_sync(through))
            except BaseException as exc:  # (reported to the test below)
                failed.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.5)  # mid-way through the users' pages
        proxy.cut()
        reader.join(timeout=60)
        assert failed and isinstance(failed[0], DirectoryError), failed
        gone = cli(policy_db_url, "sync-ldap", str(through))  # the whole command, server away
    assert gone.exit_code == 3 and "nothing changed" in gone.output, gone.output
    assert grants(policy_db_url) == before
    # A directory that answers with a third of its people is refused too.
    for dn in people[40:]:
        tree.conn.delete(dn)
    partial = cli(policy_db_url, "sync-ldap", str(sync))
    assert partial.exit_code == 4 and "over the limit of 50%" in partial.output, partial.output
    assert grants(policy_db_url) == before
    allowed = cli(policy_db_url, "sync-ldap", str(sync), "--max-removed-share", "1")
    assert allowed.exit_code == 0 and "removed 80" in allowed.stdout, allowed.output


def test_start_tls_verifies_the_server(tree: Tree, policy_db_url: str, tmp_path: Path) -> None:
    """StartTLS against slapd's throwaway CA (scripts/ldap.sh): with the CA the sync reads
    and applies; without it the server's certificate is refused and nothing changes."""
    wang = tree.user("wang")
    tree.group("ops", wang)
    port = tree.url.rsplit(":", 1)[1]
    # (scripts/ldap.sh's folder: under scripts/test's RSVC_SERVERS_DIR when it set one)
    base = Path(SERVERS_DIR) / "ldap" if SERVERS_DIR else Path("/var/tmp/retrieval-svc-ldap")
    ca = base / str(port) / "ca.pem"
    untrusted = tree.sync_file(tmp_path, start_tls=True)
    refused = cli(policy_db_url, "sync-ldap", str(untrusted))
    assert refused.exit_code == 3 and "nothing changed" in refused.output, refused.output
    assert grants(policy_db_url) == set()
    trusted = tree.sync_file(tmp_path, start_tls=True, ca_file=str(ca))
    synced = cli(policy_db_url, "sync-ldap", str(trusted))
    assert synced.exit_code == 0, synced.output
    assert grants(policy_db_url) == {"g, user:wang, 运维工程师, acme"}


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("en", "the directory refused the bind as cn=admin"),
        ("zh", "目录拒绝以 cn=admin"),
    ],
)
def test_a_wrong_bind_password_is_named_in_the_reader_s_language(
    tree: Tree, policy_db_url: str, tmp_path: Path, lang: str, said: str
) -> None:
    """A wrong password is said as such (not ldap3's exception name), with what to check, in
    the reader's language; nothing changes."""
    tree.group("ops", tree.user("wang"))
    env = {"TEST_LDAP_PASSWORD": "not-the-password", "RSVC_LANG": lang}
    done = CliRunner().invoke(
        app, ["policy", "--db", policy_db_url, "sync-ldap", str(tree.sync_file(tmp_path))], env=env
    )
    assert done.exit_code == 3, done.output
    assert said in done.output and "TEST_LDAP_PASSWORD" in done.output, done.output
    assert "not-the-password" not in done.output and "LDAPInvalidCredentials" not in done.output
    assert grants(policy_db_url) == set()


def history_of(db: str) -> list[dict[str, Any]]:
    out = CliRunner().invoke(app, ["audit", "policy", "--db", db, "--json"]).stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("all_groups", [False, True], ids=["mapped", "all-groups"])
def test_a_deleted_or_renamed_groups_grants_go_at_the_next_sync(
    tree: Tree, policy_db_url: str, tmp_path: Path, all_groups: bool
) -> None:
    db = policy_db_url
    wang, li, zhao = (tree.user(u) for u in ("wang", "li", "zhao"))
    ops = tree.group("ops", wang, li)
    finance = tree.group("finance", zhao)
    roles = {"ops": ["运维工程师"], "finance": ["财务专员"]}
    sync = tree.sync_file(tmp_path, **({"roles": {}, "all_groups": True} if all_groups else {}))
    if not all_groups:
        sync = tree.sync_file(tmp_path, roles=roles)
    assert cli(db, "sync-ldap", str(sync)).exit_code == 0
    ops_role, finance_role = ("ops", "finance") if all_groups else ("运维工程师", "财务专员")
    assert f"g, user:zhao, {finance_role}, acme" in grants(db)
    # A role the directory owns cannot be granted by hand: the next sync would take it.
    refused = cli(db, "grant-role", "chen", finance_role, "--tenant", "acme")
    assert refused.exit_code == 2 and "owned by the directory sync 'sync-ldap'" in refused.output
    # finance is deleted, ops renamed to operations (a new name, the same people).
    tree.conn.delete(finance)
    tree.conn.modify_dn(ops, "cn=operations")
    if not all_groups:  # (mapped: the operator maps the new name to the old role)
        sync = tree.sync_file(tmp_path, roles={"operations": ["运维工程师"]})
    synced = cli(db, "sync-ldap", str(sync), "--force")
    assert synced.exit_code == 0, synced.output
    expect = {"g, user:wang, 运维工程师, acme", "g, user:li, 运维工程师, acme"}
    if all_groups:
        expect = {"g, user:wang, operations, acme", "g, user:li, operations, acme"}
    assert grants(db) == expect  # zhao's finance grant went, and ops's
    assert "no longer given by the directory" in synced.stdout
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert acl.user_roles("zhao", "acme") == set()
    # A role the directory no longer gives can be granted by hand again.
    assert cli(db, "grant-role", "chen", finance_role, "--tenant", "acme").exit_code == 0
    del ops_role


def test_two_entries_with_one_id_get_nothing_and_are_named(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    staff = tree.user("bob")
    tree.conn.add(f"ou=contractors,{tree.people}", "organizationalUnit")
    contractor = f"uid=bob,ou=contractors,{tree.people}"
    tree.conn.add(contractor, "inetOrgPerson", {"cn": "bob", "sn": "bob"})
    odd = f"uid=eve\u2028admin,{tree.people}"  # (a line separator: no store holds it)
    tree.conn.add(odd, "inetOrgPerson", {"cn": "eve", "sn": "eve"})
    comma = tree.user("eve\\, admin")  # a comma is an ordinary character in an id
    tree.group("finance", staff, odd, comma)
    sync = tree.sync_file(tmp_path)
    synced = cli(policy_db_url, "sync-ldap", str(sync))
    assert synced.exit_code == 0, synced.output
    assert "user id 'bob' is held by 2 entries" in synced.stderr
    assert "ou=contractors" in synced.stderr and "line separator" in synced.stderr
    # The same refusal under a Chinese locale is Chinese, naming both entries.
    zh = CliRunner().invoke(
        app,
        ["policy", "--db", policy_db_url, "sync-ldap", str(sync), "--force"],
        env={"TEST_LDAP_PASSWORD": ADMIN[1], "RSVC_LANG": "zh"},
    )
    assert zh.exit_code == 0, zh.output
    (shared,) = [line for line in zh.stderr.splitlines() if "'bob'" in line]
    assert shared.startswith("已跳过：用户 ID 'bob' ") and "ou=contractors" in shared, shared
    assert "is held by" not in shared and "refused for each" not in shared, shared
    assert grants(policy_db_url) == {'g, "user:eve, admin", 财务专员, acme'}
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, policy_db_url))
    assert acl.user_roles("bob", "acme") == set() and acl.skipped == ()
    assert acl.user_roles("eve, admin", "acme") == {"财务专员"}


def test_the_removal_limit_holds_for_a_small_tenant(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    db = policy_db_url
    tree.group("ops", tree.user("wang"), tree.user("li"))
    assert cli(db, "sync-ldap", str(tree.sync_file(tmp_path))).exit_code == 0
    # users.base pointed at an empty OU: 2 of 2 grants would go.
    tree.conn.add(f"ou=empty,{tree.people}", "organizationalUnit")
    empty = tree.sync_file(tmp_path, users={"base": f"ou=empty,{tree.people}"})
    refused = cli(db, "sync-ldap", str(empty))
    assert refused.exit_code == 4 and "answered with no users" in refused.output, refused.output
    assert len(grants(db)) == 2
    # One of two leaving is half, within the limit; with a stricter share it is refused,
    # unless forced.
    tree.conn.delete(f"uid=li,{tree.people}")
    strict = tree.sync_file(tmp_path, removal_floor=0, max_removed_share=0.4)
    one = cli(db, "sync-ldap", str(strict))
    assert one.exit_code == 4 and "1 of 2 grants (50%, over the limit of 40%" in one.output
    forced = cli(db, "sync-ldap", str(strict), "--force")
    assert forced.exit_code == 0 and "removed 1" in forced.stdout, forced.output
    refusals = [e for e in history_of(db) if e["action"] == "sync-ldap-refused"]
    assert [e["detail"].split(":")[0] for e in refusals] == ["limit share", "limit empty"]
    assert "forced past the removal limits" in history_of(db)[0]["detail"]


def test_a_scheduled_sync_reports_its_metrics_and_keeps_going_after_a_failure(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    tree.group("ops", tree.user("wang"))
    sync = tree.sync_file(tmp_path)
    metrics = tmp_path / "sync.prom"
    args = ["sync-ldap", str(sync), "--every", "1s", "--count", "2"]
    done = cli(policy_db_url, *args, "--metrics-textfile", str(metrics))
    assert done.exit_code == 0, done.output
    # Twice: the first reads the directory; the second finds its contextCSN unchanged and
    # does not read it again (the suite's slapd keeps one, as replication needs).
    assert done.stdout.count("synced:") == 1, done.stdout
    assert "unchanged: the directory's csn is as at the last sync" in done.stdout
    values = {
        (s.name, s.labels.get("op", s.labels.get("reason", ""))): s.value
        for family in text_string_to_metric_families(metrics.read_text())
        for s in family.samples
    }
    assert values[("rsvc_directory_sync_last_success_timestamp_seconds", "")] > 0
    assert values[("rsvc_directory_sync_grants_changed", "added")] == 0  # (the last: a no-op)
    assert values[("rsvc_directory_sync_consecutive_failures", "none")] == 0
    # The server goes away: each sync fails, the loop goes on, the failures count up, and the
    # last success stays where it was (the alert reads it).
    gone = tree.sync_file(tmp_path, url="ldap://127.0.0.1:9", timeout_s=1)
    failed = cli(
        policy_db_url,
        "sync-ldap",
        str(gone),
        "--every",
        "1s",
        "--count",
        "2",
        "--metrics-textfile",
        str(metrics),
    )
    assert failed.exit_code == 0 and failed.output.count("nothing changed") == 2, failed.output
    text = metrics.read_text()
    labels = 'reason="unreachable",sync="sync-ldap",tenant="acme"'
    assert f"rsvc_directory_sync_consecutive_failures{{{labels}}} 2.0" in text
    assert "rsvc_directory_sync_last_success_timestamp_seconds" not in text  # (a new process)
    bad = cli(policy_db_url, "sync-ldap", str(sync), "--every", "0m")
    assert bad.exit_code == 2 and "not an interval" in bad.output


def test_a_change_between_syncs_is_synced_at_once_not_at_the_interval(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    # An hour's interval: the stamp, asked between syncs, brings the move in seconds.
    wang = tree.user("wang")
    ops, finance = tree.group("ops", wang), tree.group("finance")
    sync = tree.sync_file(tmp_path)
    args = ["sync-ldap", str(sync), "--every", "1h", "--check-every", "0.2", "--count", "2"]
    runs: list[Any] = []
    loop = threading.Thread(target=lambda: runs.append(cli(policy_db_url, *args)), daemon=True)
    loop.start()
    store = PolicyDatabase(DEFAULT_MODEL, policy_db_url)  # (one CliRunner at a time)
    deadline = time.monotonic() + 120
    while ["user:wang", "运维工程师", "acme"] not in map(list, store.rules().grouping):
        assert time.monotonic() < deadline and loop.is_alive(), runs
        time.sleep(0.1)
    tree.move(wang, ops, finance)
    loop.join(timeout=120)
    assert not loop.is_alive(), "the change waited for the interval"
    assert runs[0].exit_code == 0 and runs[0].stdout.count("synced:") == 2, runs[0].output
    assert grants(policy_db_url) == {"g, user:wang, 财务专员, acme"}
