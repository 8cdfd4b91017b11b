"""What Dify 1.13 really sends as an identity, and what a refusal looks like to the operator
(issue #71).

Dify 1.13.2 resolves a variable written as Dify writes it (``{{#sys.user_id#}}``); anything
else arrives as text: ``{{sys.user_id}}`` literally, and a variable that does not exist
(``{{#start.nosuchvar#}}``) as its selector, ``start.nosuchvar``. Read as ids these were
strangers served public documents; now each is a 400 naming the fix, on the knowledge path
and the tool path alike. A key may name the shapes of its callers' ids, and a key made for
Dify refuses unknown users and requests without identity. Since Dify shows any refusal on its
knowledge path as an empty answer, every refusal is counted by key and reason
(``rsvc_refusals_total``) and listed on the console's *Knowledge bases* page.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from retrieval_svc.auth.keys import ApiKeyConfig, hash_key
from tests.support import KEYS, app_client, auth, make_settings, metric_sample, postcheck_drops
from tests.support.corpus import SAMPLES_KB

pytestmark = pytest.mark.anyio

POLICY = "p, anyone, acme, *, read\ng, user:alice@example.com, 物业经理, acme\n"
# Keys beside the suite's three: one made as `new-key --for dify --user-id-shape email` makes
# it, and one admin key for the console.
DIFY_KEY, ADMIN_KEY = "test-key-dify-0123456789", "test-key-admin-0123456789"
REASON = "rsvc_refusals_total"


def body(*conditions: tuple[str, str, Any], kb: str = SAMPLES_KB) -> dict[str, Any]:
    """A /retrieval body as Dify 1.13.2 sends it: ``name`` a string."""
    return {
        "knowledge_id": kb,
        "query": "巡更 配电房",
        "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
        "metadata_condition": {
            "logical_operator": "and",
            "conditions": [
                {"name": n, "comparison_operator": op, "value": v} for n, op, v in conditions
            ],
        },
    }


@pytest.fixture
async def client(corpus: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    base = make_settings(corpus)
    keys = [
        *base.api_keys,
        ApiKeyConfig(
            name="dify",
            sha256=hash_key(DIFY_KEY),
            tenant="acme",
            unknown_user="refuse",
            anonymous="refuse",
            user_id_shape=("email",),
        ),
        ApiKeyConfig(name="admin", sha256=hash_key(ADMIN_KEY), tenant="acme", admin=True),
    ]
    settings = make_settings(
        corpus, api_keys=keys, casbin_policy=policy, console=True, console_secret="c" * 40
    )
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0


def dify() -> dict[str, str]:
    return {"Authorization": f"Bearer {DIFY_KEY}"}


def refusals(client: httpx.AsyncClient, key: str, reason: str, route: str = "/retrieval") -> float:
    labels = {"route": route, "key": key, "reason": reason}
    return metric_sample(client, REASON, labels) or 0.0


UNRESOLVED = [
    pytest.param("{{sys.user_id}}", id="the-docs-old-spelling"),
    pytest.param("{{ sys.user_id }}", id="jinja-spelling"),
    pytest.param("{{#sys.user-id#}}", id="a-name-dify-does-not-resolve"),
    pytest.param("start.nosuchvar", id="what-dify-sends-for-a-missing-variable"),
    pytest.param("sys.user_id", id="a-selector-without-braces"),
    pytest.param("1711605541421.as_user", id="a-node-selector"),
]


@pytest.mark.parametrize("value", UNRESOLVED)
@pytest.mark.parametrize("key", ["anon", "dify"])
async def test_an_identity_dify_left_unresolved_is_a_400_naming_the_fix(
    client: httpx.AsyncClient, value: str, key: str
) -> None:
    headers = auth(key) if key == "anon" else dify()
    resp = await client.post("/retrieval", json=body(("user_id", "is", value)), headers=headers)
    assert resp.status_code == 400, resp.text  # (on main: 200, public documents only)
    assert resp.json()["error_code"] == 3001
    assert resp.json()["path"] == "metadata_condition.conditions[0].value"
    assert "{{#sys.user_id#}}" in resp.json()["error_msg"]
    assert refusals(client, key, "template_identity") == 1
    zh = await client.post(
        "/retrieval",
        json=body(("user_id", "is", value)),
        headers={**headers, "Accept-Language": "zh-CN"},
    )
    assert "未被解析的 Dify 变量" in zh.json()["error_msg"], zh.json()
    tool = await client.post(
        "/v1/tools/unified-search",
        json={"query": "巡更", "knowledge_ids": SAMPLES_KB, "user_id": value},
        headers=headers,
    )
    assert tool.status_code == 400 and tool.json()["path"] == "body.user_id", tool.text


@pytest.mark.parametrize("value", ["alice", "carol", "王伟", "alice@example"])
async def test_an_id_in_no_shape_the_key_expects_is_a_400(
    client: httpx.AsyncClient, value: str
) -> None:
    resp = await client.post("/retrieval", json=body(("user_id", "is", value)), headers=dify())
    assert resp.status_code == 400, resp.text
    assert resp.json()["path"] == "metadata_condition.conditions[0].value"
    assert refusals(client, "dify", "id_shape") == 1


async def test_a_key_made_for_dify_serves_its_users_and_refuses_the_rest(
    client: httpx.AsyncClient,
) -> None:
    ok = await client.post(
        "/retrieval", json=body(("user_id", "is", "alice@example.com")), headers=dify()
    )
    assert ok.status_code == 200 and ok.json()["records"], ok.text
    stranger = await client.post(
        "/retrieval", json=body(("user_id", "is", "carol@example.com")), headers=dify()
    )
    assert stranger.status_code == 403 and stranger.json()["error_code"] == 1002
    nobody = await client.post("/retrieval", json=body(), headers=dify())
    assert nobody.status_code == 403, nobody.text  # no binding at all: seen on day one
    null = await client.post("/retrieval", json=body(("user_id", "is", None)), headers=dify())
    assert null.status_code == 403, null.text  # Dify ignores a null value: still no identity
    assert refusals(client, "dify", "unknown_user") == 1
    assert refusals(client, "dify", "no_identity") == 2
    # The default key is as it was: a stranger and nobody read public documents.
    for conditions in ([("user_id", "is", "carol@example.com")], []):
        public = await client.post("/retrieval", json=body(*conditions), headers=auth("anon"))
        assert public.status_code == 200, public.text


async def test_every_refusal_is_counted_by_key_and_reason(client: httpx.AsyncClient) -> None:
    user = ("user_id", "is", "alice@example.com")
    sent = [
        ({"Authorization": "Bearer not-a-key-0123456789"}, body(user), "-", "wrong_key"),
        ({}, body(user), "-", "malformed_authorization"),
        (dify(), body(("user_id", "is not", "alice@example.com")), "dify", "identity_condition"),
        (dify(), body(user, ("user_id", "is", "bob@example.com")), "dify", "identity_condition"),
        (dify(), body(user, ("year", ">", "not a number")), "dify", "bad_condition"),
        (dify(), body(user, kb="no-such-kb"), "dify", "unknown_knowledge_base"),
        (auth("scoped"), body(user), "scoped", "key_scope"),
        (auth("anon"), body(("user_roles", "is", "物业经理")), "anon", "identity_mode"),
        (dify(), body(("user_id", "is", "a" * 300 + "@example.com")), "dify", "invalid_request"),
        (
            dify(),
            {"knowledge_id": "", "query": "", "retrieval_setting": {"top_k": 1}},
            "dify",
            "probe",
        ),
    ]
    for headers, sent_body, key, reason in sent:
        before = refusals(client, key, reason)
        resp = await client.post("/retrieval", json=sent_body, headers=headers)
        assert 400 <= resp.status_code < 500, (reason, resp.text)
        assert refusals(client, key, reason) == before + 1, (reason, resp.text)
    older_probe = await client.post("/retrieval", headers=dify())  # no body at all
    assert older_probe.status_code == 400
    assert refusals(client, "dify", "probe") == 2
    text = (await client.get("/metrics")).text
    assert "not-a-key" not in text and "no-such-kb" not in text and DIFY_KEY not in text
    assert KEYS["anon"] not in text


async def test_the_console_lists_the_last_refusals_by_key_and_reason(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/retrieval", json=body(("user_id", "is", "{{sys.user_id}}")), headers=dify())
    await client.post("/retrieval", json=body(("user_id", "is", "alice")), headers=dify())
    await client.post("/retrieval", json=body(("user_id", "is", "alice")), headers=dify())
    form = await client.get("/console/login")
    token: Any = re.search(r'name="login_csrf" value="([^"]+)"', form.text)
    assert token is not None
    signed = await client.post(
        "/console/login", data={"key": ADMIN_KEY, "login_csrf": token.group(1)}
    )
    assert signed.status_code == 303, signed.text
    page = await client.get("/console/knowledge-bases", headers={"Accept-Language": "zh-CN"})
    assert page.status_code == 200
    rows = re.findall(r'<tr data-reason="([a-z_]+)" data-key="([^"]+)">(.*?)</tr>', page.text, re.S)
    seen = {(reason, key): cells for reason, key, cells in rows}
    assert ("id_shape", "dify") in seen and ("template_identity", "dify") in seen, rows
    assert rows[0][0] == "id_shape"  # the most recent first
    assert "<td>2</td>" in seen[("id_shape", "dify")]
    assert "未被解析的 Dify 变量" in seen[("template_identity", "dify")]  # the reader's words
    assert "{{sys.user_id}}" in page.text.replace("&#39;", "'")
