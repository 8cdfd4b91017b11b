"""An SMB share that does not hold still while it is indexed, against the suite's Samba AD
DC: files that vanish or are locked by another session between the listing and the reading,
a folder the indexing account may not list, and the server itself going away mid-run. Each
run is ``index_source`` on a real ``SmbSource``; the change is made on the real server at a
fixed point of the listing (after its first file), so the race is the same every time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch

from indexer.permissions.dacl import role_of
from indexer.pipeline import IndexOptions, index_source
from indexer.report import NOT_PRUNED, Report
from indexer.sources import ObjectRef
from indexer.sources.smb import REPARSE_REASON, SmbCredentials, SmbSource
from tests.support import ES_URL
from tests.support.corpus import TENANT, own
from tests.support.samba_ad import PASSWORD, DomainController, smb_acl
from tests.support.samba_outage import down
from tests.support.smb_share import ADMINISTRATORS, FULL, INHERIT, READ, Share, allow


def credentials(dc: DomainController, user: str = "Administrator") -> SmbCredentials:
    password = dc.admin_password if user == "Administrator" else PASSWORD
    return SmbCredentials(f"{dc.env['SAMBA_AD_DOMAIN']}\\{user}", password, "ntlm")


class Midway(SmbSource):
    """The share as listed, with ``change`` made on the server right after the first file is
    listed (its folder already read, its descriptor not yet)."""

    def __init__(self, url: str, creds: SmbCredentials, change: Callable[[], None]) -> None:
        super().__init__(url, creds)
        self.change = change

    def list(self) -> Iterator[ObjectRef]:
        listing = super().list()
        first = next(listing, None)
        if first is None:
            return
        yield first
        self.change()
        yield from listing


def run(source: SmbSource, alias: str, kb: str) -> Report:
    """One ``index --prune`` of ``source`` into ``kb``."""

    async def go() -> Report:
        es = AsyncElasticsearch(ES_URL, request_timeout=60)
        try:
            options = IndexOptions(knowledge_id=kb, alias=alias, tenant=TENANT, prune=True)
            return await index_source(es, source, options)
        finally:
            await es.close()

    try:
        return asyncio.run(go())
    finally:
        source.close()


def stored(es: Elasticsearch, alias: str, kb: str) -> dict[str, dict[str, Any]]:
    """Each stored document's name → its first chunk."""
    es.indices.refresh(index=alias)
    hits = es.search(index=alias, query={"term": {"knowledge_id": kb}}, size=500)
    return {h["_source"]["document_name"]: h["_source"] for h in hits["hits"]["hits"]}


def put(share: Share, path: str, text: str) -> None:
    """Write ``path`` in the share, its folders made first."""
    share.mkdir(path.rpartition("/")[0])
    share.write(path, text)


def failed(report: Report) -> dict[str, str]:
    return {f["document"]: f["reason"] for f in report.failures}


@pytest.fixture
def into(corpus: str) -> str:
    """The test tenant's alias (its template the corpus's)."""
    return own(corpus)


@pytest.fixture
def root(samba_ad: DomainController) -> str:
    """A fresh folder of the share for one test."""
    name = f"稳健-{uuid.uuid4().hex[:6]}"
    Share(samba_ad).mkdir(name)
    return name


def url(dc: DomainController, folder: str) -> str:
    return f"smb://{dc.address}/{dc.share}/{folder}"


def test_a_file_that_vanishes_is_gone_and_a_locked_one_is_named_not_lost(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str, root: str
) -> None:
    import smbclient

    dc, share, kb = samba_ad, Share(samba_ad), f"锁-{uuid.uuid4().hex[:6]}"
    # Listed in code-point order: 丁 (locked, unchanged) 丙 (locked, changed) 乙 (vanishes)
    # 戊 (new, locked) 甲 (untouched).
    for name in ("丁", "丙", "乙", "甲"):
        put(share, f"{root}/文件/{name}.md", f"# {name}\n\n{name}的第一版。\n")
    first = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert first.ok and first.documents_indexed == 4, first.failures
    before = stored(es_sync, into, kb)

    put(share, f"{root}/文件/丙.md", "# 丙\n\n丙的第二版。\n")
    put(share, f"{root}/文件/戊.md", "# 戊\n\n戊的第一版。\n")
    # Another person's session holds three files open denying every other open (a deny-share
    # open, as Office holds a document being edited).
    holder = {**share.kwargs(user="张三", password=PASSWORD), "connection_cache": {}}
    locks = [
        smbclient.open_file(share.unc(f"{root}/文件/{name}.md"), "rb", share_access="", **holder)
        for name in ("丁", "丙", "戊")
    ]
    try:
        source = Midway(url(dc, root), credentials(dc),
                        lambda: share.remove(f"{root}/文件/乙.md"))  # fmt: skip
        second = run(source, into, kb)
    finally:
        for lock in locks:
            lock.close()
        smbclient.reset_connection_cache(connection_cache=holder["connection_cache"])
    after = stored(es_sync, into, kb)
    why = failed(second)
    # The vanished file is gone (pruned as any deleted file), no failure of its own.
    assert "文件/乙.md" not in after and "文件/乙.md" not in why
    assert second.documents_pruned == 1
    # Locked and unchanged: nothing to read, kept as it was.
    assert after["文件/丁.md"] == before["文件/丁.md"]
    # Locked and changed, or new: named; the changed one's older text is withdrawn (its bytes
    # changed since it was written: the older chunks are no longer the file), never kept.
    assert set(why) == {"文件/丙.md", "文件/戊.md"}, why
    assert all("being used by another process" in r or "0xc0000043" in r for r in why.values())
    assert "文件/丙.md" not in after and "文件/戊.md" not in after
    # Nothing else lost.
    assert after["文件/甲.md"] == before["文件/甲.md"]

    third = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert third.ok, third.failures
    final = stored(es_sync, into, kb)
    assert sorted(final) == ["文件/丁.md", "文件/丙.md", "文件/戊.md", "文件/甲.md"]
    assert "第二版" in final["文件/丙.md"]["content"]


def test_a_folder_the_account_cannot_list_is_a_failure_never_an_empty_folder(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str, root: str
) -> None:
    dc, share, kb = samba_ad, Share(samba_ad), f"禁-{uuid.uuid4().hex[:6]}"
    zhang = dc.sids["张三"]
    share.set_dacl(root, allow(zhang, READ, INHERIT), allow(ADMINISTRATORS, FULL, INHERIT))
    for path in ("公开/通知.md", "秘密/计划.md", "秘密/深处/细节.md"):
        put(share, f"{root}/{path}", f"# {path}\n\n内容。\n")
    source = SmbSource(url(dc, root), credentials(dc, "张三"))  # (the indexing account)
    first = run(source, into, kb)
    assert first.ok and first.documents_indexed == 3, first.failures

    # The folder closed to the indexing account; its files keep their own DACLs (as NTFS
    # keeps them: a folder's new ACL does not reach files already there until propagated).
    share.set_dacl(f"{root}/秘密", allow(ADMINISTRATORS, FULL, INHERIT))
    second = run(SmbSource(url(dc, root), credentials(dc, "张三")), into, kb)
    after = stored(es_sync, into, kb)
    assert not second.ok
    why = failed(second)
    assert "秘密/" in why and "cannot be listed" in why["秘密/"], why
    # Never read as empty: nothing below it pruned; its documents withdrawn (their
    # permission sources cannot be read), each named.
    assert second.documents_pruned == 0
    assert second.documents_withdrawn == 2
    assert {"秘密/计划.md", "秘密/深处/细节.md"} <= set(why)
    assert sorted(after) == ["公开/通知.md"]

    admins = allow(ADMINISTRATORS, FULL, INHERIT)
    share.set_dacl(f"{root}/秘密", allow(zhang, READ, INHERIT), admins)
    third = run(SmbSource(url(dc, root), credentials(dc, "张三")), into, kb)
    assert third.ok, third.failures
    assert sorted(stored(es_sync, into, kb)) == [
        "公开/通知.md", "秘密/深处/细节.md", "秘密/计划.md"
    ]  # fmt: skip


def test_the_server_gone_mid_run_is_an_outage_nothing_pruned_nor_withdrawn(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str, root: str
) -> None:
    dc, share, kb = samba_ad, Share(samba_ad), f"断-{uuid.uuid4().hex[:6]}"
    admins = allow(ADMINISTRATORS, FULL, INHERIT)
    share.set_dacl(root, allow(dc.sids["财务部"], READ, INHERIT), admins)
    files = [f"{folder}/{n}.md" for folder in ("一", "二", "三") for n in range(3)]
    for path in files:
        put(share, f"{root}/{path}", f"# {path}\n\n内容。\n")
    first = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert first.ok and first.documents_indexed == len(files), first.failures
    before = stored(es_sync, into, kb)
    finance = role_of(dc.sids["财务部"])
    assert all(finance in doc["access_roles"] for doc in before.values())

    # The server stops right after the first file is listed (its folder's other files
    # listed, their descriptors not yet read) and comes back once the run has ended.
    with contextlib.ExitStack() as stack:
        source = Midway(url(dc, root), credentials(dc), lambda: stack.enter_context(down(dc)))
        second = run(source, into, kb)
    assert not second.ok
    assert second.prune_note == NOT_PRUNED and second.documents_pruned == 0
    # An outage says nothing about any file: none withdrawn, every one as it was.
    assert second.documents_withdrawn == 0, second.failures
    assert stored(es_sync, into, kb) == before
    assert any("Failed to connect" in r or "Connection" in r for r in failed(second).values())

    # The next run completes.
    put(share, f"{root}/三/新.md", "# 新\n\n服务器回来之后。\n")
    third = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert third.ok, third.failures
    assert third.documents_indexed == 1 and third.documents_skipped == len(files)
    assert "三/新.md" in stored(es_sync, into, kb)


def test_a_dacl_set_the_way_explorer_sets_it_is_read(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str, root: str
) -> None:
    """``smbcacls --set`` (as Explorer's security tab writes a DACL) stores ACL revision 3 on
    Samba: a valid revision, read like 2 and 4 — not a malformed descriptor withdrawing the
    file."""
    dc, kb = samba_ad, f"资源管理器-{uuid.uuid4().hex[:6]}"
    put(Share(dc), f"{root}/财务/预算.md", "# 预算\n\n年度预算。\n")
    smb_acl(dc, f"{root}/财务/预算.md", "ACL:BUILTIN\\Administrators:ALLOWED/0x0/FULL",
            f"ACL:{dc.env['SAMBA_AD_DOMAIN']}\\财务部:ALLOWED/0x0/READ")  # fmt: skip
    report = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert report.ok, report.failures
    roles = stored(es_sync, into, kb)["财务/预算.md"]["access_roles"]
    assert role_of(dc.sids["财务部"]) in roles
    assert role_of("S-1-5-11") not in roles  # (the share root's Authenticated Users: replaced)


def test_a_link_on_the_server_out_of_the_share_is_never_read(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str, root: str, tmp_path: Path
) -> None:
    """Symbolic links made on the file server's own disk: one pointing out of the share (a
    file, a folder) is never listed nor read — no byte from outside the share reaches the
    index. (Samba 4.17 over SMB 2/3 shows a client no symbolic link at all: it refuses those
    leaving the share, ``wide links = no``, and serves one inside as the file it names, so
    there is no reparse point to name. A server that shows one — Windows, a DFS link under
    ``msdfs root`` — marks it FILE_ATTRIBUTE_REPARSE_POINT, which the listing passes over
    and names: ``test_a_dfs_link_is_passed_over_and_named_never_followed``.)"""
    dc, kb = samba_ad, f"链接-{uuid.uuid4().hex[:6]}"
    put(Share(dc), f"{root}/链接/真.md", "# 真\n\n共享里的文件。\n")
    secret = tmp_path / "外面"
    secret.mkdir()
    (secret / "机密.md").write_text("# 机密\n\n共享之外的内容。\n", encoding="utf-8")
    os.chmod(tmp_path, 0o755)
    on_disk = Path(dc.env["SAMBA_AD_SHARE_PATH"]) / root / "链接"
    (on_disk / "出去.md").symlink_to(secret / "机密.md")
    (on_disk / "出去的文件夹").symlink_to(secret, target_is_directory=True)
    report = run(SmbSource(url(dc, root), credentials(dc)), into, kb)
    assert report.ok, report.failures
    docs = stored(es_sync, into, kb)
    assert sorted(docs) == ["链接/真.md"]
    assert not any("共享之外" in doc["content"] for doc in docs.values())


def test_a_dfs_link_is_passed_over_and_named_never_followed(
    samba_ad: DomainController, es_sync: Elasticsearch, into: str
) -> None:
    """On a DFS root (the DC's third share, ``msdfs root = yes``) a DFS link — on the server a
    symbolic link whose target is ``msdfs:server\\share\\folder`` — is what Samba shows an SMB
    2/3 client as a reparse point (a folder with FILE_ATTRIBUTE_REPARSE_POINT): the listing
    passes over it and names it in the run's summary; nothing behind it, in the share it
    names, is listed or read."""
    dc, tag = samba_ad, uuid.uuid4().hex[:6]
    kb, folder, behind = f"DFS-{tag}", f"分布-{tag}", f"远处-{tag}"
    put(Share(dc, dc.dfs_share), f"{folder}/真.md", "# 真\n\nDFS 根里的文件。\n")
    put(Share(dc), f"{behind}/远处.md", "# 远处\n\nDFS 链接之后的内容。\n")
    link = Path(dc.env["SAMBA_AD_SHARE3_PATH"]) / folder / "链接"
    link.symlink_to(f"msdfs:{dc.address}\\{dc.share}\\{behind}")
    source = SmbSource(f"smb://{dc.address}/{dc.dfs_share}/{folder}", credentials(dc))
    report = run(source, into, kb)
    assert report.ok, report.failures
    docs = stored(es_sync, into, kb)
    assert sorted(docs) == ["真.md"]
    assert not any("链接之后" in doc["content"] for doc in docs.values())
    assert report.passed_over == {REPARSE_REASON: 1}
    assert report.passed_over_examples == {REPARSE_REASON: ["链接"]}
