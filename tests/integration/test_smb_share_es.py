"""A Windows share indexed over SMB, judged by the server itself: for every test person and
every file, what the service answers (``/v1/search``, ``/retrieval``, MCP) is what SMB lets
that person read — 0 wider; narrower only where documented (an allow before a deny that a
later allow sits behind: docs/permissions.md, "Windows file shares").

The share (the suite's Samba AD DC, tests.support.samba_ad) holds per-department folders whose
files inherit their ACL, a file that kept its own DACL when it was moved under a restricted
folder, a deny ACE, DACLs in non-canonical order written raw, a DACL naming a SID the domain
does not know, an empty DACL, a folder for Domain Users (a person who is only in it through
primaryGroupID), a group nested three deep, Chinese names throughout. A person's roles are
their SIDs as the directory computes their token (``tokenGroups``) plus the ones Windows
gives every signed-in person; a disabled account has none.
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
from urllib.parse import quote

import httpx
import pytest
from elasticsearch import Elasticsearch

from indexer.permissions.dacl import EVERYONE, role_of
from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.support import ES_URL, app_client, make_settings, postcheck_drops
from tests.support.mcp import MCP_HEADERS, rpc
from tests.support.samba_ad import FOREIGN_SID, DomainController, smb_read
from tests.support.smb_share import (
    ADMINISTRATORS,
    FULL,
    INHERIT,
    READ,
    Share,
    allow,
    deny,
    token_sids,
)

pytestmark = pytest.mark.anyio

TENANT, KB = "corp", "部门资料"
SECRET = "rsvc-test-smb-dify-key-0123456789abcdef"
PEOPLE = ["张三", "李四", "王五", "赵六", "孙八", "钱七"]
DISABLED = {"钱七"}
# Where the index is narrower than Windows, by design (docs/permissions.md): a person holding
# an allow's SID and the SID of a deny standing between two allows.
NARROWED = {("公告/非规范.md", "王五")}


def _admin_full() -> Any:
    return allow(ADMINISTRATORS, FULL, INHERIT)


def build(share: Share, root: str, dc: DomainController) -> dict[str, str]:
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
    # Kept its own DACL (Everyone) when it was moved into 法务/: everyone reads it.
    file("其他/旧合同.md", allow(EVERYONE), allow(ADMINISTRATORS, FULL))
    share.rename(f"{root}/其他/旧合同.md", f"{root}/法务/旧合同.md")
    files["法务/旧合同.md"] = files.pop("其他/旧合同.md")
    return files


def roles(dc: DomainController, person: str) -> list[str]:
    """The SID roles the directory gives ``person``: their token's (none for a disabled
    account: the sync drops it)."""
    if person in DISABLED:
        return []
    return sorted(role_of(s) for s in token_sids(dc, person))


@pytest.fixture(scope="module")
def share_tree(samba_ad: DomainController) -> Iterator[tuple[str, dict[str, str]]]:
    share = Share(samba_ad)
    root = f"部门-{uuid.uuid4().hex[:6]}"
    files = build(share, root, samba_ad)
    yield root, files


def index(dc: DomainController, root: str, alias: str, *extra: str) -> dict[str, Any]:
    """``retrieval-indexer index smb://…`` as an operator runs it: credentials in the
    environment, never on the command line."""
    env = {
        **os.environ,
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
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
    samba_ad: DomainController, share_tree: tuple[str, dict[str, str]], es_sync: Elasticsearch
) -> Iterator[tuple[str, dict[str, Any]]]:
    alias = f"rsvc-test-smb-{uuid.uuid4().hex[:8]}"
    report = index(samba_ad, share_tree[0], alias)
    yield alias, report
    es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")


def policy(dc: DomainController, path: Path) -> Path:
    """The grants an Active Directory sync writes: each person's SIDs as roles (every known
    person also holds Everyone's and Authenticated Users' SIDs: retrieval_svc.acl.sids)."""
    lines = ["p, anyone, *, *, read"]
    for person in PEOPLE:
        lines += [f"g, user:{person}, {role}, {TENANT}" for role in roles(dc, person)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
async def client(
    samba_ad: DomainController,
    indexed: tuple[str, dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[httpx.AsyncClient]:
    grants = policy(samba_ad, tmp_path_factory.mktemp("policy") / "policy.csv")
    key = ApiKeyConfig(name="dify", sha256=hash_key(SECRET), tenant=TENANT)  # (casbin mode)
    settings = make_settings(indexed[0], api_keys=[key], casbin_policy=grants)
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
    share_tree: tuple[str, dict[str, str]],
    indexed: tuple[str, dict[str, Any]],
    client: httpx.AsyncClient,
) -> None:
    root, files = share_tree
    _, report = indexed
    truth = smb_truth(samba_ad, root, files)
    # The oracle is what the fixtures say it is (else the test proves nothing).
    assert "法务/合同.md" in truth["张三"] and "法务/合同.md" not in truth["李四"]
    assert "全员/手册.md" in truth["赵六"] and "财务/奖金.md" not in truth["孙八"]
    assert "公告/非规范.md" in truth["王五"] and not truth["钱七"]
    for person in PEOPLE:
        expected = truth[person] - {k for k, p in NARROWED if p == person}
        for way, shown in (await answers(client, person, files)).items():
            assert shown - truth[person] == set(), f"{person} over {way}: wider than SMB"
            assert shown == expected, f"{person} over {way}: {shown} != {expected}"
    # The file no one may read is not indexed, and the run says why.
    failed = {f["document"]: f for f in report["failures"]}
    assert set(failed) == {"其他/无人.md"}, report["failures"]
    assert failed["其他/无人.md"]["code"] == "dacl_nobody"


async def test_explain_names_the_deciding_ace(
    samba_ad: DomainController,
    indexed: tuple[str, dict[str, Any]],
    es_sync: Elasticsearch,
) -> None:
    alias, _ = indexed
    found = es_sync.search(
        index=f"{alias}.*", query={"term": {"document_name": "财务/奖金.md"}}, size=1
    )["hits"]["hits"]
    (hit,) = found
    source = hit["_source"]
    sunba = role_of(samba_ad.sids["孙八"])
    assert source["access_denied"] == [sunba]
    assert source["metadata"]["access_aces"][0].startswith(
        f"deny {samba_ad.sids['孙八']} on 财务/奖金.md"
    )
    from retrieval_svc.access import KbAccess, explain_chunk
    from retrieval_svc.auth.principal import Principal

    held = frozenset(roles(samba_ad, "孙八")) | {role_of(EVERYONE)}
    who = Principal(tenant=TENANT, user_id="孙八", roles=held)
    said = explain_chunk(source, who, KbAccess(True, "granted"))
    assert said["visible"] is False
    assert said["acl"]["code"] == "denied" and said["acl"]["denied_roles"] == [sunba]
    assert said["acl"]["set_by"] == "DACL of 财务/奖金.md"
