"""A file deeper than Windows' old 260-character path limit (``MAX_PATH``), its folders
Chinese names well under a component's 255, indexed by ``retrieval-indexer index smb://…``
from the suite's Samba AD DC: every person is shown it exactly when SMB lets them read it.
SMB 2/3 carries a path of any length; only Win32 callers ever had the limit."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.integration.test_smb_share_es import (
    PEOPLE,
    SECRET,
    TENANT,
    answers,
    index,
    smb_truth,
    synced_database,
)
from tests.support import app_client, make_settings, postcheck_drops
from tests.support.samba_ad import DomainController
from tests.support.smb_share import ADMINISTRATORS, FULL, INHERIT, READ, Share, allow

pytestmark = pytest.mark.anyio
FOLDER = "部门资料长路径目录" * 7  # 63 characters, 189 bytes in UTF-8: one component


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_path_past_260_characters_is_shown_to_whom_its_dacl_allows(
    samba_ad: DomainController, es_sync: Elasticsearch, tmp_path: Path
) -> None:
    dc, share = samba_ad, Share(samba_ad)
    root = f"长路径-{uuid.uuid4().hex[:6]}"
    top = f"{root}/法务"
    share.mkdir(top)
    share.set_dacl(top, allow(dc.sids["法务部"], READ, INHERIT),
                   allow(ADMINISTRATORS, FULL, INHERIT))  # fmt: skip
    deep = "/".join([top, *[f"{FOLDER}{n}" for n in range(4)]])
    share.mkdir(deep)  # (each folder inherits 法务部 as it is made)
    files: dict[str, str] = {}
    for name, aces in (("合同.md", ()), ("预算.md", (allow(dc.sids["财务部"]),))):
        key = f"{deep}/{name}"[len(root) + 1 :]
        word = f"词{uuid.uuid4().hex[:10]}"
        share.write(f"{root}/{key}", f"# {name}\n\n{word} 文档内容。\n")
        if aces:
            share.set_dacl(f"{root}/{key}", *aces, allow(ADMINISTRATORS, FULL))
        files[key] = word
    assert all(len(f"\\\\{dc.address}\\{dc.share}\\{root}\\{k}") > 260 for k in files)
    assert all(len(part.encode()) < 255 for k in files for part in k.split("/"))
    db = synced_database(dc, tmp_path)
    alias = f"rsvc-test-smblong-{uuid.uuid4().hex[:8]}"
    people = list(PEOPLE)
    try:
        report = index(dc, root, alias, db)
        assert report["failures"] == [], report
        truth = smb_truth(dc, root, files)
        # The oracle is what the fixture says (else the test proves nothing).
        legal, budget = files
        assert truth["张三"] == {legal} and truth["李四"] == {budget} and not truth["钱七"]
        key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)
        settings = make_settings(alias, api_keys=[key], casbin_db_url=db,
                                 policy_check_interval_s=0)  # fmt: skip
        client: httpx.AsyncClient
        async with app_client(settings) as client:
            for who in people:
                for way, shown in (await answers(client, who, files)).items():
                    assert shown - truth[who] == set(), f"{who} over {way}: wider than SMB"
                    assert shown == truth[who], f"{who} over {way}: {shown} != {truth[who]}"
            assert postcheck_drops(client) == 0, "the Elasticsearch ACL clause let one through"
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
