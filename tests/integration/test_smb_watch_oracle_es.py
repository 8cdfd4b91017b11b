"""With ``retrieval-indexer watch smb://…`` running, each change made through the share
reaches the running service's answers, judged by the server itself: after a file is moved
from an open folder into a restricted one (an SMB rename: the file keeps its own descriptor,
as on NTFS) and after a file's DACL is replaced with ``smbcacls`` (Samba sends no notification
for a security change: the watcher's re-listing finds it), every person is shown over
``/v1/search``, ``/retrieval`` and MCP exactly what SMB lets them read — 0 wider, 0 narrower.
Each wait is bounded generously and never asserted as a time."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.integration.test_smb_membership_es import agreeing, stored, watching
from tests.integration.test_smb_share_es import PEOPLE, SECRET, TENANT, synced_database
from tests.integration.test_watch_es import until
from tests.support import app_client, make_settings, postcheck_drops
from tests.support.samba_ad import DomainController, smb_acl, smb_read
from tests.support.smb_share import ADMINISTRATORS, FULL, INHERIT, READ, Share, allow

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_move_and_a_dacl_change_reach_every_answer_as_smb_decides(
    samba_ad: DomainController, es_sync: Elasticsearch, tmp_path: Path
) -> None:
    dc, share = samba_ad, Share(samba_ad)
    root = f"监视判定-{uuid.uuid4().hex[:6]}"
    domain_users = f"{dc.domain_sid}-513"
    for folder, sid in (("公开", domain_users), ("法务", dc.sids["法务部"])):
        share.mkdir(f"{root}/{folder}")
        share.set_dacl(f"{root}/{folder}", allow(sid, READ, INHERIT),
                       allow(ADMINISTRATORS, FULL, INHERIT))  # fmt: skip
    files: dict[str, str] = {}
    for key in ("公开/移动.md", "公开/通知.md", "法务/合同.md"):
        word = f"词{uuid.uuid4().hex[:10]}"
        share.write(f"{root}/{key}", f"# {key}\n\n{word} 文档内容。\n")
        files[key] = word
    db = synced_database(dc, tmp_path)
    alias = f"rsvc-test-smbjudge-{uuid.uuid4().hex[:8]}"
    watcher = watching(dc, root, alias, db, tmp_path, rescan=3)
    people = list(PEOPLE)

    def truth() -> dict[str, set[str]]:
        return {
            who: {key for key in files if smb_read(dc, who, f"{root}/{key}") is not None}
            for who in people
        }

    key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)  # (casbin mode)
    settings = make_settings(alias, api_keys=[key], casbin_db_url=db, policy_check_interval_s=0)
    try:
        until(lambda: set(files) <= stored(es_sync, alias), "never indexed", watcher)
        async with app_client(settings) as client:
            before = await agreeing(client, truth, files)
            assert "公开/通知.md" in before["李四"] and "法务/合同.md" not in before["李四"]
            # Moved through the share into 法务/: it keeps the descriptor it had (its ACEs
            # inherited from 公开/), so SMB still lets every domain user read it.
            share.rename(f"{root}/公开/移动.md", f"{root}/法务/移动.md")
            files["法务/移动.md"] = files.pop("公开/移动.md")

            def moved_in_index() -> bool:
                names = stored(es_sync, alias)
                return "公开/移动.md" not in names and "法务/移动.md" in names

            until(moved_in_index, "the move never reached the index", watcher)
            moved = await agreeing(client, truth, files)
            assert "法务/移动.md" in moved["李四"], "the oracle changed its mind about a move"
            # Explorer's way: 通知.md's DACL replaced through the share, 法务部 alone.
            smb_acl(dc, f"{root}/公开/通知.md", f"ACL:{dc.sids['法务部']}:ALLOWED/0x0/READ",
                    f"ACL:{ADMINISTRATORS}:ALLOWED/0x0/FULL")  # fmt: skip
            narrowed = await agreeing(client, truth, files)
            assert "公开/通知.md" not in narrowed["李四"]
            assert "公开/通知.md" in narrowed["张三"]
            assert postcheck_drops(client) == 0, "the Elasticsearch ACL clause let one through"
            # (the watcher ran throughout, never restarted)
            assert watcher.process.poll() is None, watcher.said()[-3000:]
    finally:
        assert watcher.stop() == 0, watcher.said()[-3000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
