"""A Windows share indexed over SMB, judged by the server itself: for every test person and
every file, what the service answers (``/v1/search``, ``/retrieval``, MCP) is what SMB lets
that person read — 0 wider; narrower only where documented (an allow before a deny that a
later allow sits behind; a deny naming a SID no directory sync read: docs/permissions.md,
"Windows file shares").

The share (the suite's Samba AD DC, tests.support.samba_ad) holds per-department folders whose
files inherit their ACL, a file that kept its own DACL when it was moved under a restricted
folder, a deny ACE, DACLs in non-canonical order written raw, a DACL naming a SID the domain
does not know, an empty DACL, a folder for Domain Users (a person who is only in it through
primaryGroupID), a group nested three deep, a deny of ``BUILTIN\\Users`` and a deny of a group
outside the sync's ``groups.base``, Chinese names throughout. People's roles are what the real
``policy sync-ldap`` gives them (``groups.base: CN=Users``, as an administrator would write
it), and the indexer judges denies against the SIDs that sync read — never a token read
around the sync.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from elasticsearch import Elasticsearch
from typer.testing import CliRunner

from indexer.permissions.dacl import EVERYONE, role_of
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from retrieval_svc.cli import app as svc_cli
from tests.support import ES_URL, app_client, make_settings, metric_sample, postcheck_drops
from tests.support.mcp import MCP_HEADERS, rpc
from tests.support.samba_ad import FOREIGN_SID, PASSWORD, DomainController, smb_read
from tests.support.smb_share import (
    ADMINISTRATORS,
    FULL,
    INHERIT,
    READ,
    Share,
    allow,
    deny,
    synced_policy,
)

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]
# The tree's root, its files (key → a word only each has), the person outside CN=Users, the
# outside group's SID, and the SID of the group inside CN=Users that holds it.
Tree = tuple[str, dict[str, str], str, str, str]

TENANT, KB = "corp", "部门资料"
SECRET = "rsvc-test-smb-dify-key-0123456789abcdef"
PEOPLE = ["张三", "李四", "王五", "赵六", "孙八", "钱七"]
BUILTIN_USERS = "S-1-5-32-545"
OUTSIDE_DENY = "其他/外包拒绝.md"
NESTED_DENY = "其他/嵌套拒绝.md"
# Where the index is narrower than Windows, by design (docs/permissions.md): a person holding
# an allow's SID and the SID of a deny standing between two allows; and, while the sync reads
# no group outside CN=Users, every person a deny of such a group does not name (fail closed).
NARROWED = {("公告/非规范.md", "王五")} | {
    (file, p)
    for file in (OUTSIDE_DENY, NESTED_DENY)
    for p in ("张三", "李四", "王五", "赵六", "孙八")
}


def _admin_full() -> Any:
    return allow(ADMINISTRATORS, FULL, INHERIT)


def outsider(dc: DomainController) -> tuple[str, str, str]:
    """A person in a group outside ``CN=Users`` (an OU of its own, as departments' groups
    often are), that group a member of a group inside ``CN=Users``: the person's name, the
    outside group's SID and the inside group's (whose members the sync cannot all read)."""
    tag = uuid.uuid4().hex[:6]
    person, group, ou = f"周九{tag}", f"外包组{tag}", f"OU=Outside{tag}"
    parent = f"外包上级{tag}"
    dc.seed({"groups": [], "users": [{"name": person, "password": PASSWORD}]})
    dc.samba_tool("ou", "add", ou)
    dc.samba_tool("group", "add", group, f"--groupou={ou}")
    dc.samba_tool("group", "addmembers", group, person)
    dc.samba_tool("group", "add", parent)
    dc.samba_tool("group", "addmembers", parent, group)

    def sid(name: str) -> str:
        shown = dc.samba_tool("group", "show", name, "--attributes=objectSid")
        (found,) = [line.split(":", 1)[1].strip() for line in shown.splitlines()
                    if line.startswith("objectSid:")]  # fmt: skip
        return found

    return person, sid(group), sid(parent)


def build(
    share: Share,
    root: str,
    dc: DomainController,
    outside: str | None = None,
    nested: str | None = None,
) -> dict[str, str]:
    """The fixture tree below ``root``; each file's key and its text (a word only it has)."""
    sid = dc.sids
    domain_users = f"{dc.domain_sid}-513"
    files: dict[str, str] = {}

    def folder(path: str, *aces: Any) -> None:
        share.mkdir(f"{root}/{path}")
        share.set_dacl(f"{root}/{path}", *aces, _admin_full())

    def file(path: str, *aces: Any) -> None:
        word = f"词{uuid.uuid4().hex[:10]}"
        share.write(f"{root}/{path}", f"# {path}\n\n{word} 文档内容。\n")
        if aces:
            share.set_dacl(f"{root}/{path}", *aces)
        files[path] = word

    share.mkdir(root)
    folder("法务", allow(sid["法务部"], READ, INHERIT))
    folder("财务", allow(sid["财务部"], READ, INHERIT))
    folder("公告", allow(sid["集团全员"], READ, INHERIT))
    folder("全员", allow(domain_users, READ, INHERIT))
    folder("其他")
    file("法务/合同.md")  # inherits 法务部
    file("财务/预算.md")  # inherits 财务部 (孙八's primary group)
    file("财务/奖金.md", deny(sid["孙八"]), allow(sid["财务部"]))  # a deny ACE
    file("公告/通知.md")  # 集团全员 ⊃ 华东区 ⊃ 上海办公室 ∋ 王五
    # Non-canonical, written raw: 王五 reads (the allow comes first); the index narrows.
    file("公告/非规范.md", allow(sid["集团全员"]), deny(sid["王五"]), allow(sid["法务部"]))
    # A deny after the last allow never decides: exact.
    file("公告/迟到的拒绝.md", allow(sid["集团全员"]), deny(sid["王五"]))
    file("全员/手册.md")  # Domain Users: 赵六 only through primaryGroupID
    file("其他/外部.md", allow(FOREIGN_SID), allow(ADMINISTRATORS, FULL))  # unknown SID
    file("其他/无人.md", allow(ADMINISTRATORS, FULL, 0x08))  # inherit-only: no one
    # BUILTIN\Users holds Domain Users and Authenticated Users: every person is refused
    # (known because the sync reads CN=Builtin).
    file("其他/内置拒绝.md", deny(BUILTIN_USERS), allow(EVERYONE))
    # A group the sync does not read (outside groups.base): refused to every person here.
    if outside is not None:
        file(OUTSIDE_DENY, deny(outside), allow(EVERYONE))
    if nested is not None:  # (a group the sync reads whose member is that outside group:
        # its members are not all known, so its deny refuses every person here too)
        file(NESTED_DENY, deny(nested), allow(EVERYONE))
    # Kept its own DACL (Everyone) when it was moved into 法务/: everyone reads it.
    file("其他/旧合同.md", allow(EVERYONE), allow(ADMINISTRATORS, FULL))
    share.rename(f"{root}/其他/旧合同.md", f"{root}/法务/旧合同.md")
    files["法务/旧合同.md"] = files.pop("其他/旧合同.md")
    # A sidecar planted by someone who may create files in 法务/ (not change 旧合同.md): by
    # default a share's sidecars are not read, so it neither hides nor retitles the file.
    planted = {"access_roles": ["无人持有"], "title": "伪造的标题"}
    share.write(f"{root}/法务/旧合同.md.meta.json", json.dumps(planted, ensure_ascii=False))
    return files


@pytest.fixture(scope="module")
def share_tree(
    samba_ad: DomainController, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tree]:
    """The tree (``Tree``)."""
    person, group, nested = outsider(samba_ad)
    PEOPLE.append(person)
    share = Share(samba_ad)
    root = f"部门-{uuid.uuid4().hex[:6]}"
    files = build(share, root, samba_ad, group, nested)
    yield root, files, person, group, nested
    PEOPLE.remove(person)


@pytest.fixture(scope="module")
def policy_db(samba_ad: DomainController, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The policy database a real sync wrote (``groups.base: CN=Users``)."""
    return synced_database(samba_ad, tmp_path_factory.mktemp("policy"))


def synced_database(samba_ad: DomainController, folder: Path) -> str:
    """A policy database where everyone may read every knowledge base of the tenant, and
    people's roles are what the real sync gives them (``groups.base: CN=Users``)."""
    db = f"sqlite:///{folder / 'policy.db'}"
    runner = CliRunner()
    allowed = runner.invoke(
        svc_cli, ["policy", "--db", db, "allow", "anyone", "*", "--tenant", TENANT]
    )
    assert allowed.exit_code == 0, allowed.output
    synced_policy(samba_ad, db, folder, f"CN=Users,{samba_ad.base_dn}", TENANT)
    return db


def index(dc: DomainController, root: str, alias: str, db: str, *extra: str) -> dict[str, Any]:
    """``retrieval-indexer index smb://…`` as an operator runs it: credentials in the
    environment, never on the command line; the policy database the sync writes."""
    env = {
        **os.environ,
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password,
        "RSVC_SMB_AUTH": "ntlm",
    }
    done = subprocess.run(
        [str(Path(sys.executable).with_name("retrieval-indexer")), "index", f"smb://{dc.address}/{dc.share}/{root}",
         "--knowledge-id", KB, "--tenant", TENANT, "--prune", "--json", *extra],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def indexed(
    samba_ad: DomainController,
    share_tree: Tree,
    policy_db: str,
    es_sync: Elasticsearch,
) -> Iterator[tuple[str, dict[str, Any]]]:
    alias = f"rsvc-test-smb-{uuid.uuid4().hex[:8]}"
    report = index(samba_ad, share_tree[0], alias, policy_db)
    yield alias, report
    es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")


def held(db: str, person: str) -> frozenset[str]:
    """The roles the service resolves ``person`` to (their synced SIDs, Everyone's…)."""
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    return frozenset(acl.person_roles(person, TENANT))


@pytest.fixture(scope="module")
async def client(
    indexed: tuple[str, dict[str, Any]], policy_db: str
) -> AsyncIterator[httpx.AsyncClient]:
    key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)  # (casbin mode)
    settings = make_settings(
        indexed[0], api_keys=[key], casbin_db_url=policy_db, policy_check_interval_s=0
    )
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0, "the Elasticsearch ACL clause let a hidden chunk through"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def smb_truth(dc: DomainController, root: str, files: dict[str, str]) -> dict[str, set[str]]:
    """What SMB lets each person read: the oracle."""
    return {
        person: {key for key in files if smb_read(dc, person, f"{root}/{key}") is not None}
        for person in PEOPLE
    }


async def answers(
    client: httpx.AsyncClient, person: str, files: dict[str, str]
) -> dict[str, set[str]]:
    """The files each way in shows the key's person, found by the word only each file has."""
    # The application names the person: /v1/search's principal, Dify's user_id condition,
    # MCP's header. (A disabled account is no one the policy knows: public passages only.)
    headers = {"Authorization": f"Bearer {SECRET}"}
    user = {
        "logical_operator": "and",
        "conditions": [{"name": "user_id", "comparison_operator": "is", "value": person}],
    }
    by_way: dict[str, set[str]] = {"search": set(), "retrieval": set(), "mcp": set()}
    for key, word in files.items():
        search = await client.post(
            "/v1/search",
            json={
                "query": word,
                "knowledge_ids": [KB],
                "top_k": 5,
                "principal": {"user_id": person},
            },
            headers=headers,
        )
        assert search.status_code == 200, search.text
        if any(word in c["content"] for c in search.json()["chunk_metadata"]):
            by_way["search"].add(key)
        dify = await client.post(
            "/retrieval",
            json={"knowledge_id": KB, "query": word,
                  "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
                  "metadata_condition": user},
            headers=headers,
        )  # fmt: skip
        assert dify.status_code == 200, dify.text
        if any(word in r["content"] for r in dify.json()["records"]):
            by_way["retrieval"].add(key)
        call = rpc(
            "tools/call", {"name": "search", "arguments": {"query": word, "knowledge_ids": [KB]}}
        )
        by_header = {**MCP_HEADERS, **headers, "X-Rsvc-User": quote(person)}
        mcp = await client.post("/mcp", json=call, headers=by_header)
        assert "result" in mcp.json(), mcp.text
        result = mcp.json()["result"]
        assert not result.get("isError"), result
        if any(word in c["content"] for c in result["structuredContent"]["chunk_metadata"]):
            by_way["mcp"].add(key)
    return by_way


async def test_every_person_sees_exactly_what_smb_lets_them_read(
    samba_ad: DomainController,
    share_tree: Tree,
    indexed: tuple[str, dict[str, Any]],
    client: httpx.AsyncClient,
) -> None:
    root, files, person, group, nested = share_tree
    _, report = indexed
    truth = smb_truth(samba_ad, root, files)
    # The oracle is what the fixtures say it is (else the test proves nothing).
    assert "法务/合同.md" in truth["张三"] and "法务/合同.md" not in truth["李四"]
    assert "全员/手册.md" in truth["赵六"] and "财务/奖金.md" not in truth["孙八"]
    assert "公告/非规范.md" in truth["王五"] and not truth["钱七"]
    assert not any("其他/内置拒绝.md" in truth[p] for p in PEOPLE)  # (every person is a User)
    assert OUTSIDE_DENY in truth["赵六"] and OUTSIDE_DENY not in truth[person]
    assert NESTED_DENY in truth["赵六"] and NESTED_DENY not in truth[person]
    for who in PEOPLE:
        expected = truth[who] - {k for k, p in NARROWED if p == who}
        for way, shown in (await answers(client, who, files)).items():
            assert shown - truth[who] == set(), f"{who} over {way}: wider than SMB"
            assert shown == expected, f"{who} over {way}: {shown} != {expected}"
    # The file no one may read is not indexed, and the run says why.
    failed = {f["document"]: f for f in report["failures"]}
    assert set(failed) == {"其他/无人.md"}, report["failures"]
    assert failed["其他/无人.md"]["code"] == "dacl_nobody"
    # The planted sidecar was passed over and named, never read.
    assert report["passed_over"] == {"a sidecar on a share: not read (--share-sidecars)": 1}
    # The deny nobody here can judge is named in the run's summary, with its file.
    assert report["fail_closed"] == {group: 1, nested: 1}
    assert report["fail_closed_examples"] == {group: [OUTSIDE_DENY], nested: [NESTED_DENY]}


def _source(es: Elasticsearch, alias: str, name: str) -> dict[str, Any]:
    found = es.search(index=f"{alias}.*", query={"term": {"document_name": name}}, size=1)
    (hit,) = found["hits"]["hits"]
    source: dict[str, Any] = hit["_source"]
    return source


async def test_explain_names_the_deciding_ace(
    samba_ad: DomainController,
    indexed: tuple[str, dict[str, Any]],
    policy_db: str,
    es_sync: Elasticsearch,
) -> None:
    alias, _ = indexed
    source = _source(es_sync, alias, "财务/奖金.md")
    sunba = role_of(samba_ad.sids["孙八"])
    assert source["access_denied"] == [sunba]
    assert source["metadata"]["access_aces"][0].startswith(
        f"deny {samba_ad.sids['孙八']} on 财务/奖金.md"
    )
    from retrieval_svc.access import KbAccess, explain_chunk
    from retrieval_svc.auth.principal import Principal

    who = Principal(tenant=TENANT, user_id="孙八", roles=held(policy_db, "孙八"))
    said = explain_chunk(source, who, KbAccess(True, "granted"))
    assert said["visible"] is False
    assert said["acl"]["code"] == "denied" and said["acl"]["denied_roles"] == [sunba]
    assert said["acl"]["set_by"] == "DACL of 财务/奖金.md"
    old = _source(es_sync, alias, "法务/旧合同.md")  # (its planted sidecar was not read)
    assert old["document_title"] != "伪造的标题" and "access_also" not in old


async def test_a_deny_no_sync_read_is_narrowed_and_named(
    share_tree: Tree,
    indexed: tuple[str, dict[str, Any]],
    policy_db: str,
    es_sync: Elasticsearch,
) -> None:
    from retrieval_svc.access import KbAccess, explain_chunk
    from retrieval_svc.auth.principal import Principal

    group = share_tree[3]
    source = _source(es_sync, indexed[0], OUTSIDE_DENY)
    assert source["access_denied"] == [role_of(EVERYONE)]
    assert source["metadata"]["access_unknown_sids"] == [group]
    who = Principal(tenant=TENANT, user_id="赵六", roles=held(policy_db, "赵六"))
    said = explain_chunk(source, who, KbAccess(True, "granted"))
    assert said["visible"] is False and said["acl"]["code"] == "narrowed"
    assert said["acl"]["unknown_sids"] == [group] and group in said["acl"]["rule"]
    # BUILTIN\Users is read from CN=Builtin: its deny is exact, held through Domain Users.
    assert role_of(BUILTIN_USERS) in held(policy_db, "赵六")
    builtin = _source(es_sync, indexed[0], "其他/内置拒绝.md")
    assert builtin["access_denied"] == [role_of(BUILTIN_USERS)]
    assert "access_unknown_sids" not in builtin["metadata"]


async def test_the_next_run_judges_again_once_the_sync_reads_the_group(
    samba_ad: DomainController,
    share_tree: Tree,
    indexed: tuple[str, dict[str, Any]],
    policy_db: str,
    client: httpx.AsyncClient,
    tmp_path: Path,
) -> None:
    """The sync now reads the whole domain: the next ordinary run re-tags the file from the
    index (no re-reading of its text) and it is exact — only the group's member is refused."""
    root, files, person, _, _ = share_tree
    synced_at = time.time()
    synced_policy(samba_ad, policy_db, tmp_path, samba_ad.base_dn, TENANT)
    deadline = time.monotonic() + 120  # (the service re-reads the policy on its next check)
    while (metric_sample(client, "rsvc_policy_loaded_timestamp_seconds") or 0) < synced_at:
        assert time.monotonic() < deadline, "the service never re-read the policy"
        await asyncio.sleep(0.05)
    report = index(samba_ad, root, indexed[0], policy_db)
    assert report["fail_closed"] == {}
    assert report["documents_retagged"] >= 2
    assert {OUTSIDE_DENY, NESTED_DENY} <= set(report["roles_changed"])
    word = {OUTSIDE_DENY: files[OUTSIDE_DENY], NESTED_DENY: files[NESTED_DENY]}
    truth = smb_truth(samba_ad, root, word)
    for who in PEOPLE:
        for way, shown in (await answers(client, who, word)).items():
            assert shown == truth[who], f"{who} over {way}: {shown} != {truth[who]}"
    assert truth["赵六"] == {OUTSIDE_DENY, NESTED_DENY} and truth[person] == set()
