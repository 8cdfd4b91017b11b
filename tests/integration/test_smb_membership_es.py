"""A person removed from an Active Directory group, and added back, while ``retrieval-indexer
watch smb://…`` keeps the share's knowledge base true: after ``policy sync-ldap`` the running
service (never restarted) answers that person over ``/v1/search``, ``/retrieval`` and MCP
exactly what SMB lets them read — the group's files lost, then regained. Nothing in the share
changed, so nothing is re-indexed: the person's SIDs (one ``directory_sid`` row per person) are
read again by the service when the sync's generation moves."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.integration.test_smb_share_es import KB, SECRET, TENANT, answers, synced_database
from tests.integration.test_watch_es import Watching, until
from tests.support import ES_URL, app_client, make_settings, postcheck_drops
from tests.support.samba_ad import PASSWORD, DomainController, smb_read
from tests.support.smb_share import ADMINISTRATORS, FULL, INHERIT, READ, Share, allow, synced_policy

pytestmark = pytest.mark.anyio
DEADLINE_S = 120.0  # (a bound on a wait, never a figure asserted)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stored(es: Elasticsearch, alias: str) -> set[str]:
    es.indices.refresh(index=f"{alias}.*", ignore_unavailable=True, allow_no_indices=True)
    found = es.options(ignore_status=(404, 503)).search(
        index=f"{alias}.*", query={"term": {"knowledge_id": KB}}, size=100
    )
    return {h["_source"]["document_name"] for h in found.body.get("hits", {}).get("hits", [])}


def watching(
    dc: DomainController, root: str, alias: str, db: str, tmp_path: Path, *, rescan: int
) -> Watching:
    """Start ``retrieval-indexer watch`` on the share's folder ``root`` as Administrator."""
    environ = {
        **os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none",
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password, "RSVC_SMB_AUTH": "ntlm",
    }  # fmt: skip
    argv = [f"smb://{dc.address}/{dc.share}/{root}", "--knowledge-id", KB, "--tenant", TENANT,
            "--rescan", str(rescan), "--health-port", "0", "--workers", "1"]  # fmt: skip
    return Watching(argv, environ, tmp_path / "watch.log")


async def agreeing(
    client: httpx.AsyncClient, truth: Callable[[], dict[str, set[str]]], files: dict[str, str]
) -> dict[str, set[str]]:
    """Wait until every way in shows each person what SMB lets them read now; the oracle."""
    expected = truth()
    deadline = time.monotonic() + DEADLINE_S
    while True:
        shown = {who: await answers(client, who, files) for who in expected}
        if all(by_way[w] == expected[who] for who, by_way in shown.items() for w in by_way):
            return expected
        if time.monotonic() > deadline:
            raise AssertionError(f"the service never agreed with SMB: {shown} != {expected}")
        await asyncio.sleep(0.5)


async def test_a_membership_change_reaches_the_running_service(
    samba_ad: DomainController, es_sync: Elasticsearch, tmp_path: Path
) -> None:
    dc, share, tag = samba_ad, Share(samba_ad), uuid.uuid4().hex[:6]
    person, group = f"吴十{tag}", f"项目组{tag}"
    dc.seed({"groups": [{"name": group, "members": [person]}],
             "users": [{"name": person, "password": PASSWORD}]})  # fmt: skip
    root = f"成员-{tag}"
    files: dict[str, str] = {}
    for folder, sid in (("项目", dc.sids[group]), ("全员", f"{dc.domain_sid}-513")):
        share.mkdir(f"{root}/{folder}")
        share.set_dacl(f"{root}/{folder}", allow(sid, READ, INHERIT),
                       allow(ADMINISTRATORS, FULL, INHERIT))  # fmt: skip
        word = f"词{uuid.uuid4().hex[:10]}"
        share.write(f"{root}/{folder}/文件.md", f"# {folder}\n\n{word} 文档内容。\n")
        files[f"{folder}/文件.md"] = word
    db = synced_database(dc, tmp_path)
    alias = f"rsvc-test-smbmember-{uuid.uuid4().hex[:8]}"
    watcher = watching(dc, root, alias, db, tmp_path, rescan=5)
    people = [person, "张三"]  # (张三: in neither group's change, the control)

    def truth() -> dict[str, set[str]]:
        return {
            who: {key for key in files if smb_read(dc, who, f"{root}/{key}") is not None}
            for who in people
        }

    def sync() -> None:
        synced_policy(dc, db, tmp_path, f"CN=Users,{dc.base_dn}", TENANT)

    key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)  # (casbin mode)
    settings = make_settings(alias, api_keys=[key], casbin_db_url=db, policy_check_interval_s=0)
    try:
        until(lambda: set(files) <= stored(es_sync, alias), "never indexed", watcher)
        async with app_client(settings) as client:
            before = await agreeing(client, truth, files)
            assert before == {person: set(files), "张三": {"全员/文件.md"}}
            # Removed from the group in the directory: SMB refuses the group's file at once;
            # the service once the sync has read the change.
            dc.samba_tool("group", "removemembers", group, person)
            assert truth()[person] == {"全员/文件.md"}
            sync()
            after = await agreeing(client, truth, files)
            assert after[person] == {"全员/文件.md"}
            dc.samba_tool("group", "addmembers", group, person)
            sync()
            again = await agreeing(client, truth, files)
            assert again == before
            assert postcheck_drops(client) == 0, "the Elasticsearch ACL clause let one through"
            # (the watcher ran throughout, never restarted)
            assert watcher.process.poll() is None, watcher.said()[-3000:]
    finally:
        assert watcher.stop() == 0, watcher.said()[-3000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
