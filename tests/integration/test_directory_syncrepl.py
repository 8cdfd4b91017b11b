"""``sync-ldap --every`` reading only what changed (issue #55 §2): an RFC 4533 refresh against
the suite's real slapd (``syncprov``), checked against a whole read after every kind of
change a directory sees — a person added, moved between groups, renamed, deleted (still named
in a group), a group deleted, an entry leaving the sync's filter."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import ldap3
import pytest

from retrieval_svc.directory import DirectoryReplica, load_sync, read_directory
from retrieval_svc.directory.groups import Directory
from retrieval_svc.directory.syncrepl import Replica
from tests.integration.test_directory_ldap import ADMIN, Tree, cli, grants
from tests.integration.test_directory_ldap import tree as tree  # (the fixture)
from tests.support import SERVERS_DIR
from tests.support.fake_provider import free_port

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


def same(a: Directory, b: Directory) -> bool:
    return (a.users, a.groups, a.parents, a.aliases) == (b.users, b.groups, b.parents, b.aliases)


def test_a_refresh_reads_only_what_changed_and_agrees_with_a_whole_read(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
    people = [tree.user(f"p{i:02d}") for i in range(30)]
    ops = tree.group("ops", *people[:20])
    finance = tree.group("finance", *people[20:])
    misc = tree.group("misc", people[0])
    sync = load_sync(tree.sync_file(tmp_path, users={"base": tree.people, "aliases": ["mail"]}))
    replica = DirectoryReplica()
    first = read_directory(sync, replica)
    assert replica.usable, replica.reason
    assert replica.changed is None  # (the first read is whole)
    assert len(replica.users.entries) == 30 and len(replica.groups.entries) == 3
    assert same(first, read_directory(sync))

    steps = [
        ("nothing", lambda: None, 0),
        ("a person added to a group", lambda: tree.conn.modify(
            ops, {"member": [(ldap3.MODIFY_ADD, [tree.user("new")])]}), 2),
        ("moved between groups", lambda: tree.move(people[3], ops, finance), 2),
        ("an alias given", lambda: tree.conn.modify(
            people[4], {"mail": [(ldap3.MODIFY_REPLACE, ["p04@example.org"])]}), 1),
        # (a DN gone: the overlays rewrite member values unseen, so the replica reads whole)
        ("renamed", lambda: tree.conn.modify_dn(people[5], "uid=p05b"), None),
        ("deleted", lambda: tree.conn.delete(people[25]), None),
        ("a group deleted", lambda: tree.conn.delete(misc), None),
        ("leaving the filter", lambda: tree.conn.modify(
            people[6], {"objectClass": [(ldap3.MODIFY_ADD, ["posixAccount"])],
                        "uidNumber": [(ldap3.MODIFY_ADD, ["1006"])],
                        "gidNumber": [(ldap3.MODIFY_ADD, ["1006"])],
                        "homeDirectory": [(ldap3.MODIFY_ADD, ["/home/p06"])]}), None),
    ]  # fmt: skip
    narrowed = load_sync(
        tree.sync_file(
            tmp_path,
            users={
                "base": tree.people,
                "aliases": ["mail"],
                "filter": "(&(objectClass=inetOrgPerson)(!(objectClass=posixAccount)))",
            },
        )
    )
    for what, change, read in steps:
        now = narrowed if what == "leaving the filter" else sync
        change()
        refreshed = read_directory(now, replica)
        whole = read_directory(now)
        assert replica.usable, (what, replica.reason)
        assert same(refreshed, whole), (what, diff(refreshed, whole))
        assert replica.changed == read, (what, replica.changed)  # (None: read whole)
    assert "uid=p05b," + tree.people.lower() in refreshed.users
    assert normal(people[25]) not in refreshed.users and normal(misc) not in refreshed.groups
    assert normal(people[6]) not in refreshed.users


def diff(a: Directory, b: Directory) -> dict[str, object]:
    """Where two reads differ (for the failure message)."""
    out: dict[str, object] = {}
    for name in ("users", "groups", "parents", "aliases"):
        x, y = getattr(a, name), getattr(b, name)
        out[name] = {k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
    return out


def normal(dn: str) -> str:
    from retrieval_svc.directory.groups import normal_dn

    return normal_dn(dn)


def test_a_memberof_sync_reads_whole(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenLDAP's memberof overlay writes memberOf without a new entryCSN: a refresh would
    never see a person join a group."""
    monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
    wang, li = tree.user("wang"), tree.user("li")
    ops = tree.group("ops", wang)
    sync = load_sync(tree.sync_file(tmp_path, groups={"base": tree.groups,
                                                      "membership": "memberOf"}))  # fmt: skip
    replica = DirectoryReplica()
    read_directory(sync, replica)
    tree.conn.modify(ops, {"member": [(ldap3.MODIFY_ADD, [li])]})
    after = read_directory(sync, replica)
    assert not replica.usable and "memberOf" in replica.reason
    assert after.groups_of(normal(li)) == {normal(ops)}
    assert same(after, read_directory(sync))


def test_a_cookie_the_server_cannot_use_falls_back_to_a_whole_read(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
    tree.group("ops", tree.user("wang"))
    sync = load_sync(tree.sync_file(tmp_path))
    replica = DirectoryReplica()
    read_directory(sync, replica)
    # A replica whose copy is not what the cookie says (a cookie from another server): the
    # refresh either starts again or is refused — either way the directory read is whole.
    replica.users = Replica(b"rid=000,csn=garbage", {})
    replica.groups = Replica(b"not a cookie", {})
    assert same(read_directory(sync, replica), read_directory(sync))


def test_sync_ldap_every_syncs_through_a_refresh(
    tree: Tree, policy_db_url: str, tmp_path: Path
) -> None:
    wang = tree.user("wang")
    tree.group("ops", wang)
    sync = tree.sync_file(tmp_path)
    run = cli(policy_db_url, "sync-ldap", str(sync), "--every", "1", "--count", "2")
    assert run.exit_code == 0, run.output
    assert grants(policy_db_url) == {"g, user:wang, 运维工程师, acme"}
    assert "cannot say what changed" not in run.output, run.output


@pytest.fixture
def loaded_offline(tmp_path: Path) -> Iterator[str]:
    """A slapd of its own whose people were added by ``slapadd -q`` (as a restore or a bulk
    load does): its contextCSN is behind those entries' entryCSN. Its URL."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "ldap.sh"
    env = {**os.environ, **({"RSVC_SERVERS_DIR": SERVERS_DIR} if SERVERS_DIR else {})}
    port = str(free_port())
    started = subprocess.run([str(script), "start", port], capture_output=True, text=True,
                             env=env, timeout=600, check=False)  # fmt: skip
    assert started.returncode == 0, started.stderr
    ldif = tmp_path / "restore.ldif"
    suffix = "dc=example,dc=org"
    lines = [f"dn: ou=restored,ou=people,{suffix}\nobjectClass: organizationalUnit\nou: restored"]
    lines += [f"dn: ou=restored,ou=groups,{suffix}\nobjectClass: organizationalUnit\nou: restored"]
    for uid in ("wang", "li"):
        lines.append(f"dn: uid={uid},ou=restored,ou=people,{suffix}\nobjectClass: inetOrgPerson\n"
                     f"uid: {uid}\ncn: {uid}\nsn: {uid}")  # fmt: skip
    lines.append(f"dn: cn=ops,ou=restored,ou=groups,{suffix}\nobjectClass: groupOfNames\ncn: ops\n"
                 f"member: uid=wang,ou=restored,ou=people,{suffix}")  # fmt: skip
    ldif.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    try:
        loaded = subprocess.run([str(script), "load", port, str(ldif)], capture_output=True,
                                text=True, env=env, timeout=600, check=False)  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr
        yield started.stdout.strip()
    finally:
        subprocess.run([str(script), "stop", port], capture_output=True, env=env, check=False)


def test_a_directory_loaded_offline_is_read_whole_not_seen_empty(
    loaded_offline: str, policy_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenLDAP answers syncrepl only with entries not past its contextCSN: here, nobody. A
    # replica filled from that would see an empty directory (and each sync be refused as
    # "answered with no users"); it is held to the paged read beside it and given up.
    monkeypatch.setenv("TEST_LDAP_PASSWORD", ADMIN[1])
    tree = Tree.__new__(Tree)  # (the loaded branch, not a new one)
    tree.url, tree.ou = loaded_offline, "restored"
    sync = tree.sync_file(tmp_path)
    replica = DirectoryReplica()
    read = read_directory(load_sync(sync), replica)
    assert not replica.usable and "slapadd" in replica.reason, replica.reason
    assert same(read, read_directory(load_sync(sync))) and len(read.users) == 2
    run = cli(policy_db_url, "sync-ldap", str(sync), "--every", "1", "--count", "2")
    assert run.exit_code == 0, run.output
    assert grants(policy_db_url) == {"g, user:wang, 运维工程师, acme"}
    assert "cannot say what changed" in run.output and "-w" in run.output, run.output
