"""One decision about knowledge-base access (issue #14 item 1): retrieval and explain both
call ``retrieval_svc.access.kb_access``, explain sees only what its key could retrieve, and
the two agree for every principal × knowledge base below."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from tests.support import app_client, make_settings, postcheck_drops
from tests.support.corpus import ACL_KB, FILTER_KB, SAMPLES_KB, own, tenant_index

pytestmark = pytest.mark.anyio

POLICY = """\
p, anyone, acme, building-*, read
p, 物业经理, acme, acl-forms, read
p, 财务专员, acme, filters, read
g, user:wang, 物业经理, acme
"""
SCOPE = ("building-*", "acl-forms")  # `filters` is outside both keys' scope
ADMIN, TRUSTED = "access-admin-key-0123456789", "access-trusted-key-0123456789"


@pytest.fixture
async def client(corpus: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    keys = [
        ApiKeyConfig(
            name="admin", sha256=hash_key(ADMIN), tenant="acme", knowledge_ids=SCOPE, admin=True
        ),
        ApiKeyConfig(
            name="trusted",
            sha256=hash_key(TRUSTED),
            tenant="acme",
            knowledge_ids=SCOPE,
            mode=IdentityMode.TRUSTED,
        ),
    ]
    settings = make_settings(corpus, api_keys=keys, casbin_policy=policy, policy_check_interval_s=0)
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0


def one_chunk(es: Elasticsearch, alias: str, kb: str) -> str:
    hits = es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=1)["hits"]["hits"]
    return str(hits[0]["_source"]["chunk_id"])


async def explain(client: httpx.AsyncClient, chunk_id: str, principal: dict[str, Any]) -> Any:
    resp = await client.post(
        "/v1/explain",
        json={"chunk_id": chunk_id, "principal": principal},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_explain_sees_nothing_outside_its_keys_scope(
    client: httpx.AsyncClient, es_sync: Elasticsearch, corpus: str
) -> None:
    outside = await explain(client, one_chunk(es_sync, corpus, FILTER_KB), {})
    assert outside == {**outside, "found": False, "chunks": []}
    inside = await explain(client, one_chunk(es_sync, corpus, SAMPLES_KB), {})
    assert inside["found"] and inside["chunks"][0]["knowledge_id"] == SAMPLES_KB


ROLE_SETS = [
    list(r) for n in range(3) for r in itertools.combinations(["物业经理", "财务专员", "访客"], n)
]


async def test_explain_and_retrieval_agree_on_every_principal_and_knowledge_base(
    client: httpx.AsyncClient, es_sync: Elasticsearch, corpus: str
) -> None:
    chunk_of = {kb: one_chunk(es_sync, corpus, kb) for kb in (SAMPLES_KB, ACL_KB, FILTER_KB)}
    checked, outcomes = 0, set()
    for roles, user, kb in itertools.product(ROLE_SETS, [None, "wang", "zhao"], chunk_of):
        principal: dict[str, Any] = {"roles": roles}
        conditions = [{"name": "user_roles", "comparison_operator": "in", "value": roles}]
        if user:
            principal["user_id"] = user
            conditions.append({"name": "user_id", "comparison_operator": "is", "value": user})
        answer = await client.post(
            "/retrieval",
            json={
                "knowledge_id": kb,
                "query": "消防 巡更 通用",
                "retrieval_setting": {"top_k": 3},
                "metadata_condition": {"conditions": conditions},
            },
            headers={"Authorization": f"Bearer {TRUSTED}"},
        )
        retrieval_allowed = answer.status_code != 403
        explained = await explain(client, chunk_of[kb], principal)
        explain_allowed = (
            explained["found"] and explained["chunks"][0]["knowledge_base"]["readable"]
        )
        assert retrieval_allowed == explain_allowed, (roles, user, kb, answer.json(), explained)
        checked += 1
        outcomes.add((kb, retrieval_allowed))
    assert checked == len(ROLE_SETS) * 3 * 3
    # Both answers occur: by scope (filters), by policy (acl-forms), and granted (building-*).
    assert outcomes == {(SAMPLES_KB, True), (ACL_KB, True), (ACL_KB, False), (FILTER_KB, False)}


async def test_another_tenant_sees_nothing_and_cannot_probe_knowledge_ids(corpus: str) -> None:
    other = "access-other-tenant-key-0123456789"
    keys = [ApiKeyConfig(name="other", sha256=hash_key(other), tenant="other")]
    headers = {"Authorization": f"Bearer {other}"}
    async with app_client(make_settings(corpus, api_keys=keys)) as c:
        # acme's knowledge base, same id, default policy that lets anyone read anything:
        # tenant "other" gets exactly what a knowledge base that does not exist gets.
        body = {"query": "巡更", "retrieval_setting": {"top_k": 5}}
        existing = await c.post(
            "/retrieval", json={**body, "knowledge_id": SAMPLES_KB}, headers=headers
        )
        missing = await c.post(
            "/retrieval", json={**body, "knowledge_id": "no-such-kb"}, headers=headers
        )
        assert existing.status_code == missing.status_code == 404
        assert existing.json()["error_code"] == missing.json()["error_code"] == 2001
        search = await c.post(
            "/v1/search",
            json={"query": "巡更", "knowledge_ids": [SAMPLES_KB, ACL_KB]},
            headers=headers,
        )
        assert search.status_code == 404  # nothing of acme's, not even its existence
        assert postcheck_drops(c) == 0


async def test_unknown_field_errors_list_only_the_callers_fields(
    corpus: str, es_sync: Elasticsearch
) -> None:
    # Tenant "other" has one knowledge base, with one custom field; acme's building-ops has
    # category, version, effective_date, … None of those may be shown to tenant "other".
    es_sync.index(
        index=tenant_index(es_sync, corpus, "other"),
        id="other-my-kb-1",
        document={
            "chunk_id": "other-my-kb-1",
            "tenant": "other",
            "knowledge_id": "my-kb",
            "content": "其他租户的文档",
            "metadata": {"color": "红"},
        },
        refresh=True,
    )
    key = "access-scoped-other-key-0123456789"
    keys = [
        ApiKeyConfig(name="mine", sha256=hash_key(key), tenant="other", knowledge_ids=("my-kb",))
    ]
    async with app_client(make_settings(corpus, api_keys=keys)) as c:
        resp = await c.post(
            "/v1/search",
            json={
                "query": "文档",
                "knowledge_ids": ["my-kb"],
                "filter": {"field": "nonexistent", "op": "eq", "value": "x"},
            },
            headers={"Authorization": f"Bearer {key}"},
        )
    assert resp.status_code == 400 and resp.json()["path"] == "filter.field"
    message = resp.json()["error_msg"]
    assert "color" in message and "document_title" in message  # its own, and the chunk fields
    for elsewhere in ("category", "version", "effective_date"):
        assert elsewhere not in message, message


async def test_answers_follow_the_reader_s_language(
    client: httpx.AsyncClient, es_sync: Elasticsearch, corpus: str
) -> None:
    """``error_msg`` and /v1/explain's reasons in Chinese under ``Accept-Language: zh-CN``;
    English without it; the codes and the fields a program reads unchanged (issue #58 §3)."""
    zh = {"Accept-Language": "zh-CN,zh;q=0.9"}
    body = {"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 1}}
    bad = {"Authorization": "Bearer not-a-key"}
    english = await client.post("/retrieval", json=body, headers=bad)
    chinese = await client.post("/retrieval", json=body, headers={**bad, **zh})
    assert english.status_code == chinese.status_code == 403
    assert english.json() == {"error_code": 1002, "error_msg": "the API key is not valid"}
    assert chinese.json() == {"error_code": 1002, "error_msg": "API 密钥无效"}
    # FastAPI's own routes too (a validation error of /v1/merge, not a direct route).
    invalid = await client.post(
        "/v1/merge", json={"rag_chunks": 3}, headers={"Authorization": f"Bearer {ADMIN}", **zh}
    )
    assert invalid.status_code == 400 and invalid.json()["error_code"] == 3001
    assert invalid.json()["error_msg"].startswith("请求无效："), invalid.json()
    # A field Dify left out: said from pydantic's error type, no English phrase left in it.
    missing = await client.post(
        "/retrieval", json={"query": "巡更"}, headers={"Authorization": f"Bearer {ADMIN}", **zh}
    )
    assert missing.json() == {
        "error_code": 3001,
        "error_msg": "knowledge_id：缺少必填字段",
        "path": "knowledge_id",
    }
    chunk = one_chunk(es_sync, corpus, SAMPLES_KB)
    asked = {"chunk_id": chunk, "principal": {}}
    admin = {"Authorization": f"Bearer {ADMIN}"}
    plain = (await client.post("/v1/explain", json=asked, headers=admin)).json()
    worded = (await client.post("/v1/explain", json=asked, headers={**admin, **zh})).json()
    assert plain["chunks"][0]["acl"]["code"] == worded["chunks"][0]["acl"]["code"]
    assert plain["chunks"][0]["acl"]["rule"].isascii()
    assert not worded["chunks"][0]["acl"]["rule"].isascii(), worded
    assert not worded["chunks"][0]["knowledge_base"]["reason"].isascii(), worded


async def test_the_server_s_default_language_answers_a_request_that_names_none(
    corpus: str, es_sync: Elasticsearch, tmp_path: Path
) -> None:
    """RSVC_DEFAULT_LANGUAGE=zh-CN: what Dify (no Accept-Language) shows in its run log is
    Chinese; a request's Accept-Language still wins."""
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    admin = ApiKeyConfig(
        name="admin", sha256=hash_key(ADMIN), tenant="acme", knowledge_ids=SCOPE, admin=True
    )
    settings = make_settings(
        corpus, api_keys=[admin], casbin_policy=policy, default_language="zh-CN"
    )
    body = {"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 1}}
    bad = {"Authorization": "Bearer not-a-key"}
    async with app_client(settings) as c:
        dify = await c.post("/retrieval", json=body, headers=bad)
        english = await c.post("/retrieval", json=body, headers={**bad, "Accept-Language": "en"})
        invalid = await c.post(
            "/v1/merge", json={"rag_chunks": 3}, headers={"Authorization": f"Bearer {ADMIN}"}
        )
        chunk = one_chunk(es_sync, corpus, SAMPLES_KB)
        asked = {"chunk_id": chunk, "principal": {}}
        explained = (
            await c.post("/v1/explain", json=asked, headers={"Authorization": f"Bearer {ADMIN}"})
        ).json()
    assert dify.json() == {"error_code": 1002, "error_msg": "API 密钥无效"}
    assert english.json() == {"error_code": 1002, "error_msg": "the API key is not valid"}
    assert invalid.json()["error_code"] == 3001 and not invalid.json()["error_msg"].isascii()
    assert not explained["chunks"][0]["acl"]["rule"].isascii(), explained


async def test_the_service_says_which_cluster_it_writes_to_without_its_password(
    corpus: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At start, one line names the cluster, the alias and the tenants — never a password
    the URL carries."""
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    admin = ApiKeyConfig(
        name="admin", sha256=hash_key(ADMIN), tenant="acme", knowledge_ids=SCOPE, admin=True
    )
    settings = make_settings(corpus, api_keys=[admin], casbin_policy=policy)
    parts = urlsplit(settings.es_url)
    with_password = f"{parts.scheme}://elastic:s3cret-pw@{parts.netloc}"
    settings = settings.model_copy(update={"es_url": with_password})
    with caplog.at_level(logging.WARNING, logger="retrieval_svc.app"):
        async with app_client(settings):
            pass
    said = [r.getMessage() for r in caplog.records if "indices under alias" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert f"{parts.scheme}://{parts.netloc}" in said[0] and corpus in said[0], said
    assert "s3cret-pw" not in caplog.text and "elastic:" not in caplog.text


async def test_the_service_says_which_cluster_it_writes_to_in_chinese(
    corpus: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a Chinese locale the start line is Chinese to its end, the tenants included."""
    monkeypatch.setenv("RSVC_LANG", "zh")
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    settings = make_settings(corpus, casbin_policy=policy)
    with caplog.at_level(logging.WARNING, logger="retrieval_svc.app"):
        async with app_client(settings):
            pass
    said = [r.getMessage() for r in caplog.records if "Elasticsearch 位于" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert f"别名 {corpus} 之下" in said[0] and "；租户 " in said[0], said
    assert "tenants" not in said[0], said
