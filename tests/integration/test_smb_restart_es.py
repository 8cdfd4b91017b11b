"""The domain controller restarted (``scripts/samba-ad.sh halt`` then ``resume``: LDAP,
Kerberos and SMB gone and back on the same address): the next ``index smb://…`` completes
and every person's answers over ``/v1/search``, ``/retrieval`` and MCP still equal what SMB
lets them read; and a running ``watch smb://…`` opens its change notifications again and
keeps the share true without being restarted."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.integration.test_smb_share_es import (
    NARROWED,
    PEOPLE,
    SECRET,
    TENANT,
    answers,
    build,
    index,
    smb_truth,
    synced_database,
)
from tests.integration.test_watch_es import Watching, until
from tests.support import ES_URL, app_client, make_settings
from tests.support.samba_ad import DomainController
from tests.support.samba_outage import down
from tests.support.smb_share import Share

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def watchers() -> Iterator[list[Watching]]:
    started: list[Watching] = []
    yield started
    for watcher in started:
        watcher.stop()


async def test_after_the_dc_restarts_answers_still_equal_what_smb_lets_each_read(
    samba_ad: DomainController, es_sync: Elasticsearch, tmp_path: Path
) -> None:
    dc = samba_ad
    root = f"重启-{uuid.uuid4().hex[:6]}"
    files = build(Share(dc), root, dc)
    alias = f"rsvc-test-smbrestart-{uuid.uuid4().hex[:8]}"
    db = synced_database(dc, tmp_path)
    try:
        assert index(dc, root, alias, db)["failures"]
        with down(dc):
            gone = index(dc, root, alias, db)
        # The server gone: an outage, nothing pruned.
        assert gone["documents_pruned"] == 0 and gone["failures"], gone
        again = index(dc, root, alias, db)
        assert again["documents_pruned"] == 0
        assert {f["document"] for f in again["failures"]} == {"其他/无人.md"}, again
        truth = smb_truth(dc, root, files)
        assert "法务/合同.md" in truth["张三"] and "法务/合同.md" not in truth["李四"]
        key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)
        settings = make_settings(alias, api_keys=[key], casbin_db_url=db)
        async with app_client(settings) as client:
            for person in PEOPLE:
                expected = truth[person] - {k for k, p in NARROWED if p == person}
                for way, shown in (await answers(client, person, files)).items():
                    assert shown == expected, f"{person} over {way}: {shown} != {expected}"
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")


def _stored(es: Elasticsearch, alias: str) -> set[str]:
    es.indices.refresh(index=f"{alias}.*", ignore_unavailable=True, allow_no_indices=True)
    # (503 while the watcher's new index has no shard yet)
    found = es.options(ignore_status=(404, 503)).search(index=f"{alias}.*", size=100)
    return {h["_source"]["document_name"] for h in found.body.get("hits", {}).get("hits", [])}


def test_watch_opens_its_notifications_again_after_the_dc_restarts(
    samba_ad: DomainController, es_sync: Elasticsearch, watchers: list[Watching], tmp_path: Path
) -> None:
    dc, share = samba_ad, Share(samba_ad)
    root = f"重连-{uuid.uuid4().hex[:6]}"
    share.mkdir(f"{root}/通知")
    share.write(f"{root}/通知/前.md", "# 前\n\n重启之前。\n")
    alias = f"rsvc-test-smbreconnect-{uuid.uuid4().hex[:8]}"
    environ = {
        **os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none",
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password, "RSVC_SMB_AUTH": "ntlm",
    }  # fmt: skip
    # Re-listing only every hour: what arrives after the restart came by notification.
    argv = [f"smb://{dc.address}/{dc.share}/{root}", "--knowledge-id", "重连", "--rescan",
            "3600", "--health-port", "0", "--workers", "1"]  # fmt: skip
    watcher = Watching(argv, environ, tmp_path / "watch.log")
    watchers.append(watcher)
    try:
        until(lambda: "通知/前.md" in _stored(es_sync, alias), "never indexed", watcher)
        with down(dc):
            time.sleep(3)  # (the watcher's connections see the server gone)
        # A change made before the watcher has asked again is the re-listing's to find, so
        # one is made every few seconds until one is heard.
        written: list[str] = []
        deadline = time.monotonic() + 90

        def heard() -> bool:
            if not written or time.monotonic() - float(written[-1].split("-")[1][:-3]) > 5:
                name = f"通知/后-{time.monotonic():.0f}.md"
                share.write(f"{root}/{name}", "# 后\n\n重启之后。\n")
                written.append(name)
            return bool(set(written) & _stored(es_sync, alias)) or time.monotonic() > deadline

        until(heard, "no change heard after the restart", watcher)
        assert set(written) & _stored(es_sync, alias), watcher.said()[-3000:]
        # And the listing's connection is whole again: a removal narrows too.
        share.remove(f"{root}/通知/前.md")
        until(lambda: "通知/前.md" not in _stored(es_sync, alias), "never removed", watcher)
    finally:
        assert watcher.stop() == 0, watcher.said()[-3000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
