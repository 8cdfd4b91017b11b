"""Index the sample folder with the CLI, then ask /retrieval as different users: each sees
exactly the documents their roles allow (design.md §3, §4, §7)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from retrieval_svc.auth.keys import IdentityMode
from tests.support import (
    ES_URL,
    SAMPLES,
    app_client,
    auth,
    key_entry,
    make_settings,
    postcheck_drops,
)

pytestmark = pytest.mark.anyio

KB = "e2e-building"
# document title → (a query that finds it, the roles that may read it; empty = everyone)
DOCUMENTS = {
    "巡更操作指南 v2.1": ("巡更点打卡标签", set()),
    "巡检异常上报流程": ("巡检异常上报", set()),
    "访客与会议室服务指南": ("会议室预约访客", set()),
    "配电房设备参数与操作规程": ("配电房倒闸操作", {"运维工程师", "物业经理"}),
    "消防控制室值班制度": ("消防控制室值班", {"消防值班员", "物业经理"}),
    "物业费用与合同管理制度": ("物业服务费滞纳金", {"物业经理", "财务专员"}),
    "电梯维保记录规范": ("电梯维保困人", {"运维工程师"}),
}
USERS = {
    "anonymous": set(),
    "ops-engineer": {"运维工程师"},
    "property-manager": {"物业经理"},
    "finance": {"财务专员"},
    "fire-duty+finance": {"消防值班员", "财务专员"},
}


@pytest.fixture(scope="module")
def indexed(corpus: str) -> str:
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    result = CliRunner().invoke(
        indexer_cli,
        ["index", str(SAMPLES), "--knowledge-id", KB, "--dataset-name", "楼宇运营知识库"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    return corpus


@pytest.fixture
async def client(indexed: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(indexed, api_keys=[key_entry("anon", mode=IdentityMode.TRUSTED)])
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0


@pytest.mark.parametrize("user", list(USERS))
async def test_each_user_sees_exactly_their_documents(client: httpx.AsyncClient, user: str) -> None:
    roles = USERS[user]
    for title, (query, readers) in DOCUMENTS.items():
        conditions = [{"name": "user_roles", "comparison_operator": "in", "value": sorted(roles)}]
        resp = await client.post(
            "/retrieval",
            json={
                "knowledge_id": KB,
                "query": query,
                "retrieval_setting": {"top_k": 10, "score_threshold": 0},
                "metadata_condition": {
                    "logical_operator": "and",
                    "conditions": conditions if roles else [],
                },
            },
            headers=auth("anon"),
        )
        assert resp.status_code == 200, resp.text
        seen = {r["title"] for r in resp.json()["records"]}
        may_read = not readers or bool(readers & roles)
        assert (title in seen) is may_read, f"{user} / {title}: seen={may_read is False}"
        visible = {t for t, (_, r) in DOCUMENTS.items() if not r or r & roles}
        assert seen <= visible, f"{user} saw {seen - visible}"
