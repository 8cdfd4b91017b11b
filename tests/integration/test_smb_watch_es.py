"""``retrieval-indexer watch smb://…`` keeps a Windows share true: the share's own change
notifications (SMB2 CHANGE_NOTIFY, watch-tree) name what changed, a DACL changed on a file
re-stamps its chunks from the index (never re-embedded), and what notifications do not carry
— Samba 4.17 sends none for a security change — arrives with the re-listing. Judged by the
server: after each change, who SMB lets read the file is who the index shows it to."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from indexer.permissions.dacl import role_of
from indexer.sources.smb import SmbCredentials, SmbSource
from indexer.watch.share_events import share_events
from tests.integration.test_watch_es import Watching, until
from tests.support import ES_URL
from tests.support.samba_ad import DomainController, smb_read
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

KB = "共享盘"


def credentials(dc: DomainController) -> SmbCredentials:
    return SmbCredentials(f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator", dc.admin_password, "ntlm")


def test_the_share_s_notifications_name_a_new_file_and_a_renamed_one(
    samba_ad: DomainController,
) -> None:
    share = Share(samba_ad)
    root = f"通知-{uuid.uuid4().hex[:6]}"
    share.mkdir(f"{root}/法务")
    source = SmbSource(f"smb://{samba_ad.address}/{samba_ad.share}/{root}", credentials(samba_ad))

    async def heard(change: Any, wanted: str) -> set[str]:
        stop = asyncio.Event()
        seen: set[str] = set()

        async def listen() -> None:
            async for got in share_events(source, stop):
                seen.update(got.keys)
                if wanted in seen:
                    return

        task = asyncio.create_task(listen())
        # (the request is outstanding once the thread has sent it; a change before that is
        # kept by the server for the handle only after its first request)
        await asyncio.sleep(2)
        await asyncio.to_thread(change)
        try:
            await asyncio.wait_for(task, 60)
        finally:
            stop.set()
        return seen

    assert "法务/合同.md" in asyncio.run(
        heard(lambda: share.write(f"{root}/法务/合同.md", "# 合同\n"), "法务/合同.md")
    )
    moved = asyncio.run(
        heard(
            lambda: share.rename(f"{root}/法务/合同.md", f"{root}/法务/旧合同.md"), "法务/旧合同.md"
        )
    )
    assert "法务/旧合同.md" in moved
    source.close()


@pytest.fixture
def watchers() -> Iterator[list[Watching]]:
    started: list[Watching] = []
    yield started
    for watcher in started:
        watcher.stop()


def stored(es: Elasticsearch, alias: str) -> dict[str, dict[str, Any]]:
    es.indices.refresh(index=f"{alias}.*", ignore_unavailable=True, allow_no_indices=True)
    found = es.options(ignore_status=(404, 503)).search(
        index=f"{alias}.*", query={"term": {"knowledge_id": KB}}, size=100
    )
    return {
        h["_source"]["document_name"]: h["_source"]
        for h in found.body.get("hits", {}).get("hits", [])
    }


def test_a_dacl_changed_on_the_share_narrows_the_index_without_re_reading(
    samba_ad: DomainController, es_sync: Elasticsearch, watchers: list[Watching], tmp_path: Path
) -> None:
    dc, share = samba_ad, Share(samba_ad)
    root = f"监视-{uuid.uuid4().hex[:6]}"
    share.mkdir(f"{root}/财务")
    share.set_dacl(f"{root}/财务", allow(dc.sids["财务部"], READ, INHERIT),
                   allow(ADMINISTRATORS, FULL, INHERIT))  # fmt: skip
    share.write(f"{root}/财务/预算.md", "# 预算\n\n年度预算草案。\n")
    alias = f"rsvc-test-smbwatch-{uuid.uuid4().hex[:8]}"
    db = f"sqlite:///{tmp_path / 'policy.db'}"  # (the sync's SIDs: denies judged against them)
    synced_policy(dc, db, tmp_path, f"CN=Users,{dc.base_dn}", "default")
    environ = {
        **os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none",
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_SMB_USER": f"{dc.env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": dc.admin_password, "RSVC_SMB_AUTH": "ntlm",
    }  # fmt: skip
    argv = [f"smb://{dc.address}/{dc.share}/{root}", "--knowledge-id", KB, "--rescan", "5",
            "--health-port", "0", "--workers", "1"]  # fmt: skip
    watcher = Watching(argv, environ, tmp_path / "watch.log")
    watchers.append(watcher)
    sunba, lisi = role_of(dc.sids["孙八"]), role_of(dc.sids["李四"])
    try:
        until(lambda: "财务/预算.md" in stored(es_sync, alias), "never indexed", watcher)
        first = stored(es_sync, alias)["财务/预算.md"]
        assert smb_read(dc, "孙八", f"{root}/财务/预算.md") is not None
        # Explorer's way: the file's DACL replaced — 孙八 denied, before the group's allow.
        share.set_dacl(f"{root}/财务/预算.md", deny(dc.sids["孙八"]),
                       allow(dc.sids["财务部"]), allow(ADMINISTRATORS, FULL))  # fmt: skip
        assert smb_read(dc, "孙八", f"{root}/财务/预算.md") is None
        assert smb_read(dc, "李四", f"{root}/财务/预算.md") is not None

        def narrowed() -> bool:
            doc = stored(es_sync, alias)["财务/预算.md"]
            return sunba in (doc.get("access_denied") or [])

        until(narrowed, "the deny never reached the index", watcher)
        after = stored(es_sync, alias)["财务/预算.md"]
        assert lisi not in (after.get("access_denied") or [])
        # Re-stamped from the index: the same text and chunk, not read and written anew.
        assert after["content_hash"] == first["content_hash"]
        assert after["source_etag"] == first["source_etag"]
    finally:
        assert watcher.stop() == 0, watcher.said()[-3000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
