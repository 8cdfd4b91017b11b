"""A share whose own ACL (its *share permissions*) is narrower than its files' DACLs, judged by
the server itself: Windows — and Samba — grant through a share only what both the share's ACL
and the file's DACL allow, so for every test person and every file the service's answers
(``/v1/search``, ``/retrieval``, MCP) equal what SMB lets that person read — before the share
ACL is set, after it narrows the share to 财务部, and after it denies one of 财务部's members:
each change picked up by the next listing, as ``index`` (a CronJob) or ``watch``'s re-listing
makes one. ``explain`` names the share's ACE that decided.

The suite's second share (tests.support.samba_ad: ``财务共享``) is used, so the first share
stays open for every other test; its ACL is removed again afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch

from indexer.permissions.dacl import EVERYONE, role_of
from retrieval_svc.access import KbAccess, explain_chunk
from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from retrieval_svc.auth.principal import Principal
from tests.integration.test_smb_share_es import KB, PEOPLE, SECRET, TENANT, answers, held
from tests.support import ES_URL, app_client, make_settings, postcheck_drops
from tests.support.samba_ad import DomainController, share_acl, smb_read
from tests.support.smb_share import (
    ADMINISTRATORS,
    FULL,
    INHERIT,
    Share,
    allow,
    deny,
    synced_policy,
)

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

ADMINS_FULL = f"{ADMINISTRATORS}:ALLOWED/0x0/FULL"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def tree(samba_ad: DomainController) -> Iterator[tuple[str, dict[str, str]]]:
    """Files whose own DACLs are wider than the share's ACL will be; each key and its word."""
    share, sid = Share(samba_ad, samba_ad.share2), samba_ad.sids
    root = f"共享-{uuid.uuid4().hex[:6]}"
    files: dict[str, str] = {}

    def file(path: str, *aces: Any) -> None:
        word = f"词{uuid.uuid4().hex[:10]}"
        share.write(f"{root}/{path}", f"# {path}\n\n{word} 文档内容。\n")
        if aces:
            share.set_dacl(f"{root}/{path}", *aces, allow(ADMINISTRATORS, FULL))
        files[path] = word

    share.mkdir(root)
    for folder in ("全员", "财务", "法务"):
        share.mkdir(f"{root}/{folder}")
    share.set_dacl(
        f"{root}/法务",
        allow(sid["法务部"], 0x120089, INHERIT),
        allow(ADMINISTRATORS, FULL, INHERIT),
    )
    file("公开.md", allow(EVERYONE))  # the file lets everyone read it
    file("全员/手册.md")  # inherits the share root's: Authenticated Users
    file("财务/奖金.md", deny(sid["孙八"]), allow(sid["财务部"]))
    file("法务/合同.md")  # inherits 法务部 only: neither list holds the other's SIDs
    yield root, files
    share_acl(samba_ad, samba_ad.share2)  # (removed: the share open to all again)


@pytest.fixture(scope="module")
def policy_db(samba_ad: DomainController, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The policy database a real ``sync-ldap`` wrote, every group of the domain read (so the
    share's deny of a person is judged against SIDs the directory knows)."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc_cli

    folder = tmp_path_factory.mktemp("policy")
    db = f"sqlite:///{folder / 'policy.db'}"
    allowed = CliRunner().invoke(
        svc_cli, ["policy", "--db", db, "allow", "anyone", "*", "--tenant", TENANT]
    )
    assert allowed.exit_code == 0, allowed.output
    synced_policy(samba_ad, db, folder, samba_ad.base_dn, TENANT)
    return db


def index(dc: DomainController, root: str, alias: str, db: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "RSVC_ES_URL": ES_URL,
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password,
        "RSVC_SMB_AUTH": "ntlm",
    }
    done = subprocess.run(
        [str(Path(sys.executable).with_name("retrieval-indexer")), "index",
         f"smb://{dc.address}/{dc.share2}/{root}", "--knowledge-id", KB, "--tenant", TENANT,
         "--prune", "--json"],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def share_alias(es_sync: Elasticsearch) -> Iterator[str]:
    name = f"rsvc-test-smbshare-{uuid.uuid4().hex[:8]}"
    yield name
    es_sync.options(ignore_status=404).indices.delete(index=f"{name}.*")


@pytest.fixture(scope="module")
async def client(
    samba_ad: DomainController,
    tree: tuple[str, dict[str, str]],
    share_alias: str,
    policy_db: str,
) -> AsyncIterator[httpx.AsyncClient]:
    alias = share_alias
    index(samba_ad, tree[0], alias, policy_db)  # (the index must exist before the service)
    key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)  # (casbin mode)
    settings = make_settings(
        alias, api_keys=[key], casbin_db_url=policy_db, policy_check_interval_s=0
    )
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0, "the Elasticsearch ACL clause let a hidden chunk through"


def truth(dc: DomainController, root: str, files: dict[str, str]) -> dict[str, set[str]]:
    """What SMB lets each person read through the share: the oracle."""
    return {
        person: {
            key
            for key in files
            if smb_read(dc, person, f"{root}/{key}", share=dc.share2) is not None
        }
        for person in PEOPLE
    }


async def agree(
    dc: DomainController, root: str, files: dict[str, str], c: httpx.AsyncClient
) -> dict[str, set[str]]:
    seen = truth(dc, root, files)
    for person in PEOPLE:
        for way, shown in (await answers(c, person, files)).items():
            assert shown - seen[person] == set(), f"{person} over {way}: wider than SMB"
            assert shown == seen[person], f"{person} over {way}: {shown} != {seen[person]}"
    return seen


def stored(es: Elasticsearch, alias: str, name: str) -> dict[str, Any]:
    es.indices.refresh(index=f"{alias}.*")
    hits = es.search(index=f"{alias}.*", query={"term": {"document_name": name}}, size=1)
    source: dict[str, Any] = hits["hits"]["hits"][0]["_source"]
    return source


def explain(db: str, source: dict[str, Any], person: str) -> dict[str, Any]:
    who = Principal(tenant=TENANT, user_id=person, roles=held(db, person))
    said: dict[str, Any] = explain_chunk(source, who, KbAccess(True, "granted"))
    return said


async def test_the_share_acl_narrows_as_windows_does_and_each_change_is_picked_up(
    samba_ad: DomainController,
    tree: tuple[str, dict[str, str]],
    share_alias: str,
    client: httpx.AsyncClient,
    es_sync: Elasticsearch,
    policy_db: str,
) -> None:
    dc, (root, files), sid, alias, db = samba_ad, tree, samba_ad.sids, share_alias, policy_db
    # 1. No share ACL (Samba answers Everyone full control): the files' DACLs alone decide.
    seen = await agree(dc, root, files, client)
    assert "公开.md" in seen["张三"] and "法务/合同.md" in seen["张三"]

    # 2. The share narrowed to 财务部 (and the administrators the indexer signs in as).
    share_acl(dc, dc.share2, ADMINS_FULL, f"{sid['财务部']}:ALLOWED/0x0/READ")
    report = index(dc, root, alias, db)
    assert report["failures"] == [], report
    seen = await agree(dc, root, files, client)
    assert seen["张三"] == set() and seen["李四"] == {"公开.md", "全员/手册.md", "财务/奖金.md"}
    assert "公开.md" in seen["孙八"] and "财务/奖金.md" not in seen["孙八"]
    public = stored(es_sync, alias, "公开.md")
    assert public["metadata"]["access_roles_from"] == f"DACL of 公开.md, share {dc.share2}"
    said = explain(db, public, "张三")
    assert said["visible"] is False and said["acl"]["code"] == "restricted"
    assert f"allow {sid['财务部']} on share {dc.share2}" in said["acl"]["aces"]
    contract = stored(es_sync, alias, "法务/合同.md")  # two lists: 法务部's and the share's
    assert set(contract["access_roles"]) == {role_of(sid["法务部"]), role_of(ADMINISTRATORS)}
    assert set(contract["access_also"]) == {role_of(sid["财务部"]), role_of(ADMINISTRATORS)}
    said = explain(db, contract, "张三")
    assert said["acl"]["code"] == "narrowed" and said["visible"] is False

    # 3. The share denies 孙八, whom 财务部 holds: refused on every file of the share.
    share_acl(
        dc, dc.share2, f"{sid['孙八']}:DENIED/0x0/FULL", ADMINS_FULL,
        f"{sid['财务部']}:ALLOWED/0x0/READ",
    )  # fmt: skip
    assert index(dc, root, alias, db)["failures"] == []
    seen = await agree(dc, root, files, client)
    assert seen["孙八"] == set() and "公开.md" in seen["李四"]
    said = explain(db, stored(es_sync, alias, "公开.md"), "孙八")
    assert said["acl"]["code"] == "denied"
    assert said["acl"]["denied_roles"] == [role_of(sid["孙八"])]
    assert f"deny {sid['孙八']} on share {dc.share2}" in said["acl"]["aces"]


def test_a_share_acl_that_cannot_be_read_is_an_outage_never_wider(
    samba_ad: DomainController, tree: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share whose permissions the server will not tell (Samba tells any signed-in account,
    so srvsvc is asked here about a share name it does not have: its real refusal) lists
    nothing, prunes nothing, and a file looked at alone is withdrawn, never public."""
    from indexer.sources import smb, smb_share
    from indexer.sources.srvsvc import read_share_descriptor

    def refused(session: Any, server: str, share: str) -> bytes | None:
        return read_share_descriptor(session, server, "没有这个共享")

    monkeypatch.setattr(smb_share, "read_share_descriptor", refused)
    credentials = smb.SmbCredentials(
        f"{samba_ad.env['SAMBA_AD_DOMAIN']}\\Administrator", samba_ad.admin_password, "ntlm"
    )
    source = smb.SmbSource(f"smb://{samba_ad.address}/{samba_ad.share2}/{tree[0]}", credentials)
    try:
        assert list(source.list()) == []
        (failure,) = source.failures
        assert failure.scope == "rest" and failure.reason.startswith(smb_share.SHARE_UNREADABLE)
        assert "ShareInfoRefused" in failure.reason
        looked = source.look("公开.md")
        assert looked is not None and isinstance(looked.dacl, str)  # (withdrawn, never public)
    finally:
        source.close()


def test_watch_picks_up_a_share_acl_change_with_its_re_listing(
    samba_ad: DomainController, es_sync: Elasticsearch, policy_db: str, tmp_path: Path
) -> None:
    """``watch smb://`` reads the share's ACL again at each re-listing (no change notification
    reports it: it sits on no file), and re-stamps from the index, never re-reading the text."""
    from tests.integration.test_watch_es import Watching, until

    dc, share = samba_ad, Share(samba_ad, samba_ad.share2)
    share_acl(dc, dc.share2)  # (open to all, whatever an earlier test left)
    root = f"监视-{uuid.uuid4().hex[:6]}"
    share.mkdir(root)
    share.write(f"{root}/公开.md", "# 公开\n\n人人可读的通知。\n")
    share.set_dacl(f"{root}/公开.md", allow(EVERYONE), allow(ADMINISTRATORS, FULL))
    alias = f"rsvc-test-smbsharewatch-{uuid.uuid4().hex[:8]}"
    environ = {
        **os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none",
        "RSVC_CASBIN_DB_URL": policy_db,
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password, "RSVC_SMB_AUTH": "ntlm",
    }  # fmt: skip
    argv = [f"smb://{dc.address}/{dc.share2}/{root}", "--knowledge-id", KB, "--rescan", "5",
            "--health-port", "0", "--workers", "1"]  # fmt: skip
    watcher = Watching(argv, environ, tmp_path / "watch.log")
    narrowed_to = {role_of(ADMINISTRATORS), role_of(dc.sids["财务部"])}

    def doc() -> dict[str, Any]:
        es_sync.indices.refresh(index=f"{alias}.*", ignore_unavailable=True, allow_no_indices=True)
        found = es_sync.options(ignore_status=(404, 503)).search(
            index=f"{alias}.*", query={"term": {"document_name": "公开.md"}}, size=1
        )
        hits = found.body.get("hits", {}).get("hits", [])
        return dict(hits[0]["_source"]) if hits else {}

    try:
        opened = {role_of(EVERYONE), role_of(ADMINISTRATORS)}  # (the file's DACL alone)
        until(lambda: set(doc().get("access_roles") or []) == opened, "never indexed", watcher)
        first = doc()
        share_acl(dc, dc.share2, ADMINS_FULL, f"{dc.sids['财务部']}:ALLOWED/0x0/READ")
        assert smb_read(dc, "张三", f"{root}/公开.md", share=dc.share2) is None
        until(
            lambda: set(doc().get("access_roles") or []) == narrowed_to,
            "the share ACL never reached the index",
            watcher,
            shows=doc,
        )
        after = doc()
        assert after["content_hash"] == first["content_hash"]  # (re-stamped, not re-read)
        assert after["metadata"]["access_roles_from"] == f"DACL of 公开.md, share {dc.share2}"
    finally:
        share_acl(dc, dc.share2)
        assert watcher.stop() == 0, watcher.said()[-3000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
