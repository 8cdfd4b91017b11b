"""``sync-ldap`` against a real Active Directory domain controller (Samba's, started by the
suite: tests.support.samba_ad): SIDs read from ``objectSid``, the primary group (Domain Users)
given, groups nested three deep, a disabled account dropped, foreign security principals
followed or named, members read by range to the end, Chinese names throughout, and ``--every``
reading only what changed — or reading whole, saying why, where a change cannot be proven
complete."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import ldap3
import pytest
from typer.testing import CliRunner

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.cli import app
from retrieval_svc.directory import DirectoryReplica, ad, load_sync, read_directory
from tests.support.samba_ad import FOREIGN_SID, PASSWORD, DomainController, sync_body

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


def sync_file(dc: DomainController, folder: Path, **more: Any) -> Path:
    body = sync_body(
        dc,
        "acme",
        f"CN=Users,{dc.base_dn}",
        {"Domain Users": ["全体员工"], "法务部": ["法务"], "集团全员": ["集团"]},
        aliases=("mail", "userPrincipalName"),
        page_size=4,  # several pages even for a test domain
        **more,
    )
    path = folder / f"sync-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    return path


def cli(dc: DomainController, db: str, *args: str) -> Any:
    env = {"TEST_AD_PASSWORD": dc.admin_password, "RSVC_LANG": "en"}
    return CliRunner().invoke(app, ["policy", "--db", db, *args], env=env)


def held(db: str) -> dict[str, set[str]]:
    """Each person's roles in tenant acme, as the service resolves a principal who is them."""
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    people = ("张三", "李四", "王五", "赵六", "钱七", "孙八")
    return {p: set(acl.user_roles(p, "acme")) for p in people}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'policy.db'}"


def test_people_hold_their_sids_primary_group_and_nested_groups(
    samba_ad: DomainController, db: str, tmp_path: Path
) -> None:
    sid = {name: f"sid:{s}" for name, s in samba_ad.sids.items()}
    domain_users = f"sid:{samba_ad.domain_sid}-513"
    synced = cli(samba_ad, db, "sync-ldap", str(sync_file(samba_ad, tmp_path)))
    assert synced.exit_code == 0, synced.output
    roles = held(db)
    # 赵六's only membership is his primary group: a role mapped from Domain Users is his.
    # Builtin groups (CN=Builtin, read beside groups.base) give their SIDs, never a role:
    # BUILTIN\Users holds Domain Users and Authenticated Users, so it is his (as is Pre-Windows
    # 2000 Compatible Access, S-1-5-32-554, holding Authenticated Users on this DC).
    builtin = {r for r in roles["赵六"] if r.startswith("sid:S-1-5-32-")}
    assert "sid:S-1-5-32-545" in builtin
    assert roles["赵六"] - builtin == {"全体员工", domain_users, sid["赵六"], sid["公告读者"]}
    # 王五: three groups deep (上海办公室 ⊂ 华东区 ⊂ 集团全员), each group's SID and role.
    assert {sid["上海办公室"], sid["华东区"], sid["集团全员"], "集团"} <= roles["王五"]
    # 孙八's primary group is 财务部, which lists no member: he holds it all the same.
    assert sid["财务部"] in roles["孙八"] and sid["财务部"] in roles["李四"]
    assert {"法务", sid["法务部"], sid["张三"]} <= roles["张三"]
    # 钱七 is disabled: nothing, though 法务部 lists him.
    assert roles["钱七"] == set()
    # 公告读者 holds Authenticated Users: every enabled person is in it.
    assert all(sid["公告读者"] in roles[p] for p in ("张三", "李四", "王五", "赵六", "孙八"))
    # The foreign principal nobody here holds is named, and gives nothing.
    assert FOREIGN_SID in synced.output and "foreign security principal" in synced.output
    assert "disabled accounts left out" in synced.stdout
    # A principal who is 赵六 also holds Everyone and Authenticated Users.
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert {"sid:S-1-1-0", "sid:S-1-5-11", domain_users} <= acl.person_roles("赵六", "acme")
    # Known by mail too (an alias), in Chinese: the id is the sAMAccountName.
    assert acl.identify("zhaoliu@corp.example.org", "acme").person == "赵六"


def test_a_disabled_account_loses_its_roles_at_the_next_sync(
    samba_ad: DomainController, db: str, tmp_path: Path
) -> None:
    name = f"临时{uuid.uuid4().hex[:4]}"
    samba_ad.seed({"groups": [], "users": [{"name": name, "password": PASSWORD}]})
    samba_ad.samba_tool("group", "addmembers", "法务部", name)
    sync = sync_file(samba_ad, tmp_path)
    assert cli(samba_ad, db, "sync-ldap", str(sync)).exit_code == 0
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert "法务" in acl.user_roles(name, "acme")
    samba_ad.samba_tool("user", "disable", name)
    again = cli(samba_ad, db, "sync-ldap", str(sync))
    assert again.exit_code == 0, again.output
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert acl.user_roles(name, "acme") == set()
    # A hand grant does not make a disabled account someone: no role, no Everyone.
    granted = cli(samba_ad, db, "grant-role", name, "访客", "--tenant", "acme")
    assert granted.exit_code == 0, granted.output
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    who = acl.identify(name, "acme")
    assert who.person is None and "disabled" in who.via, who
    # Enabled again: the next sync makes them a person, the hand grant in force again.
    samba_ad.samba_tool("user", "enable", name)
    assert cli(samba_ad, db, "sync-ldap", str(sync)).exit_code == 0
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert acl.identify(name, "acme").person == name
    assert {"访客", "法务"} <= acl.person_roles(name, "acme")
    samba_ad.samba_tool("user", "delete", name)


def test_builtin_groups_are_read_for_their_sids_unless_turned_off(
    samba_ad: DomainController, db: str, tmp_path: Path
) -> None:
    """BUILTIN\\Users (CN=Builtin) is every domain user's; with ``builtin: false`` no one's
    here, so a share's deny naming it refuses every person (the indexer's rule)."""
    from retrieval_svc.acl.known_sids import known_sids

    sync = sync_file(samba_ad, tmp_path, all_groups=True)
    assert cli(samba_ad, db, "sync-ldap", str(sync)).exit_code == 0
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert "sid:S-1-5-32-545" in acl.user_roles("赵六", "acme")
    assert not {"Users", "Administrators"} & acl.user_roles("赵六", "acme")  # (SIDs only)
    assert "S-1-5-32-545" in known_sids(db, "acme")
    off = sync_file(samba_ad, tmp_path, all_groups=True,
                    groups={"base": f"CN=Users,{samba_ad.base_dn}", "filter": "(objectClass=group)",
                            "builtin": False})  # fmt: skip
    assert cli(samba_ad, db, "sync-ldap", str(off), "--force").exit_code == 0
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert "sid:S-1-5-32-545" not in acl.user_roles("赵六", "acme")
    assert "S-1-5-32-545" not in known_sids(db, "acme")


def test_an_expired_account_is_no_one(samba_ad: DomainController, db: str, tmp_path: Path) -> None:
    """Windows refuses a logon once ``accountExpires`` is past, though the account is enabled:
    the person holds nothing, Everyone's SID included."""
    name = f"过期{uuid.uuid4().hex[:4]}"
    samba_ad.seed({"groups": [], "users": [{"name": name, "password": PASSWORD}]})
    samba_ad.samba_tool("group", "addmembers", "法务部", name)
    samba_ad.samba_tool("user", "setexpiry", name, "--days=0")  # (expires now)
    synced = cli(samba_ad, db, "sync-ldap", str(sync_file(samba_ad, tmp_path)))
    assert synced.exit_code == 0, synced.output
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    assert acl.user_roles(name, "acme") == set()
    assert acl.identify(name, "acme").person is None  # (no Everyone: PERSON_ROLES never given)
    samba_ad.samba_tool("user", "delete", name)


def test_members_are_read_by_range_to_the_end(
    samba_ad: DomainController, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samba answers whole unless asked by range; asked two values at a time, as a Windows DC
    answers past MaxValRange, the sync reads every group exactly as a whole read does."""
    names = [f"成员{uuid.uuid4().hex[:4]}{i}" for i in range(7)]
    group = f"大组{uuid.uuid4().hex[:4]}"
    samba_ad.seed({
        "groups": [{"name": group, "members": names}],
        "users": [{"name": n, "password": PASSWORD} for n in names],
    })  # fmt: skip
    monkeypatch.setenv("TEST_AD_PASSWORD", samba_ad.admin_password)
    sync = load_sync(sync_file(samba_ad, tmp_path))
    whole = read_directory(sync)
    # The server really answers in ranges when asked: 2 values, then the next range.
    conn = ldap3.Connection(
        ldap3.Server(samba_ad.ldap_url), samba_ad.admin_dn, samba_ad.admin_password,
        auto_bind=True, auto_range=False, return_empty_attributes=False,
    )  # fmt: skip
    conn.search(samba_ad.dns[group], "(objectClass=*)", ldap3.BASE, attributes=["member;range=0-1"])
    assert list(conn.response[0]["raw_attributes"]) == ["member;range=0-1"]
    conn.unbind()
    monkeypatch.setattr(ad, "RANGE_STEP", 2)
    ranged = read_directory(sync)
    assert ranged.parents == whole.parents and ranged.sids == whole.sids
    big = next(dn for dn, n in ranged.groups.items() if n == group)
    assert sum(big in parents for parents in ranged.parents.values()) == len(names)
    for name in names:
        samba_ad.samba_tool("user", "delete", name)
    samba_ad.samba_tool("group", "delete", group)


def test_every_reads_what_changed_and_reads_whole_when_it_cannot_prove_it(
    samba_ad: DomainController, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_AD_PASSWORD", samba_ad.admin_password)
    sync = load_sync(sync_file(samba_ad, tmp_path))
    replica = DirectoryReplica()
    first = read_directory(sync, replica)
    assert replica.changed is None  # (read whole: nothing earlier)
    assert read_directory(sync, replica).users == first.users and replica.changed == 0
    # A new person in a new group: only they are read, and the directory is whole.
    name, group = f"新人{uuid.uuid4().hex[:4]}", f"新组{uuid.uuid4().hex[:4]}"
    samba_ad.seed({"groups": [{"name": group, "members": [name]}],
                   "users": [{"name": name, "password": PASSWORD}]})  # fmt: skip
    after = read_directory(sync, replica)
    assert replica.changed is not None and 2 <= replica.changed < len(first.users)
    assert read_directory(sync).parents == after.parents  # the same as a whole read
    assert name in after.users.values()
    # Membership changed on a group: seen through the group's uSNChanged.
    samba_ad.samba_tool("group", "removemembers", group, name)
    removed = read_directory(sync, replica)
    assert replica.changed is not None
    assert removed.parents == read_directory(sync).parents
    # A deletion: the replica cannot prove a delta complete (the old DN could be reused), so
    # the sync reads whole and says why.
    samba_ad.samba_tool("user", "delete", name)
    gone = read_directory(sync, replica)
    assert replica.changed is None and "deleted" in replica.reason
    assert name not in gone.users.values()
    samba_ad.samba_tool("group", "delete", group)


def test_sids_are_one_row_a_person_and_a_sync_changing_them_reloads(
    samba_ad: DomainController, db: str, tmp_path: Path
) -> None:
    """Where SIDs live: one ``directory_sid`` row a person (and one of every SID the sync read),
    never a policy line a SID — a 50,000-person domain would be millions of lines to reload.
    A principal holds the same roles as when they were lines; a sync that changes only SIDs
    changes the stamp, so the service reloads; an old policy's ``sid:`` lines are moved, not
    refused as a mass removal."""
    import sqlalchemy as sa

    sync = sync_file(samba_ad, tmp_path)
    store = PolicyDatabase(DEFAULT_MODEL, db)
    # A policy from before: a sid: line per person and SID, given by this sync, owning them.
    cli(samba_ad, db, "allow", "anyone", "*")
    old_lines = [("user:张三", f"sid:{samba_ad.sids['法务部']}"),
                 ("user:赵六", f"sid:{samba_ad.domain_sid}-513")]  # fmt: skip
    with store.engine().begin() as conn:
        for user, role in old_lines:
            conn.execute(sa.text("INSERT INTO casbin_rule (ptype, v0, v1, v2) VALUES "
                                 "('g', :u, :r, 'acme')"), {"u": user, "r": role})  # fmt: skip
    synced = cli(samba_ad, db, "sync-ldap", str(sync))
    assert synced.exit_code == 0, synced.output
    assert not any(g[1].startswith("sid:") for g in store.rules().grouping)
    from retrieval_svc.acl import directory_sids  # (after: on old code, the line above fails)
    from retrieval_svc.acl.known_sids import known_sids

    with store.engine().connect() as conn:
        rows = conn.execute(sa.text("SELECT subject, COUNT(*) FROM directory_sid "
                                    "WHERE tenant = 'acme' GROUP BY subject")).all()  # fmt: skip
    subjects = dict(rows)
    assert set(subjects.values()) == {1}  # one row a person, however many SIDs they hold
    people = {"user:张三", "user:李四", "user:王五", "user:赵六", "user:孙八"}
    assert people <= subjects.keys() and "user:钱七" not in subjects
    assert directory_sids.KNOWN in subjects
    roles = held(db)
    sid = {name: f"sid:{s}" for name, s in samba_ad.sids.items()}
    builtin = {r for r in roles["赵六"] if r.startswith("sid:S-1-5-32-")}  # (CN=Builtin's)
    assert roles["赵六"] - builtin == {"全体员工", f"sid:{samba_ad.domain_sid}-513", sid["赵六"],
                                      sid["公告读者"]}  # fmt: skip
    assert {sid["上海办公室"], sid["华东区"], sid["集团全员"], "集团"} <= roles["王五"]
    assert roles["钱七"] == set()
    # Every SID the sync read is known in the tenant — a group's with no member listed too —
    # and nothing of another tenant's.
    known = known_sids(db, "acme").synced
    assert {samba_ad.sids[n] for n in ("财务部", "华东区", "赵六")} <= known
    # 法务部 holds a foreign principal nobody here resolves: who holds it cannot be told.
    assert samba_ad.sids["法务部"] not in known
    assert samba_ad.sids["钱七"] in known  # (a disabled account: read, so known; held by no one)
    assert known_sids(db, "other").synced == frozenset()
    # A change of SIDs alone: the stamp moves, a reload gives the new SID.
    acl = AccessControl(source=store)
    group = f"新组{uuid.uuid4().hex[:4]}"
    samba_ad.seed({"groups": [{"name": group, "members": ["赵六"]}], "users": []})
    again = cli(samba_ad, db, "sync-ldap", str(sync))
    assert again.exit_code == 0, again.output
    assert acl.reload_if_changed()
    (new_sid,) = acl.user_roles("赵六", "acme") - roles["赵六"]
    assert new_sid.startswith(f"sid:{samba_ad.domain_sid}-")
    assert new_sid.removeprefix("sid:") in known_sids(db, "acme").synced
    samba_ad.samba_tool("group", "delete", group)
