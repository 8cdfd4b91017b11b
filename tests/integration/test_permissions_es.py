"""Permissions end to end over HTTP: the seed's worked case, key modes through Dify's
conditions, knowledge-base policy, explain, and a policy change without restart."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from tests.support import (
    EXPIRED_AT,
    Token,
    app_client,
    make_settings,
    metric_sample,
    minted,
    postcheck_drops,
)
from tests.support.corpus import SAMPLES_KB

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

SECRET = "a-signing-secret-for-the-tests-" + "x" * 33
POLICY = """\
p, anyone, acme, building-*, read
p, anyone, acme, acl-forms, read
p, 财务专员, acme, finance-*, read
g, user:wang, 物业经理, acme
g, user:li, 运维工程师, acme
g, user:zhao, 保洁主管, acme
g, 物业经理, 运维工程师, acme
"""
# oidc keys need a provider: tests/integration/test_oidc_es.py
SECRETS = {m: f"perm-key-{m.value}-0123456789" for m in IdentityMode if m is not IdentityMode.OIDC}
ADMIN = "perm-key-admin-0123456789"


def keys() -> list[ApiKeyConfig]:
    out = [
        ApiKeyConfig(
            name=f"k-{m.value}",
            sha256=hash_key(s),
            tenant="acme",
            mode=m,
            roles=("物业经理",) if m is IdentityMode.FIXED else (),
            token_secret=SECRET if m is IdentityMode.SIGNED else None,
        )
        for m, s in SECRETS.items()
    ]
    out.append(ApiKeyConfig(name="admin", sha256=hash_key(ADMIN), tenant="acme", admin=True))
    return out


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.csv"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
async def client(corpus: str, policy: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        corpus, api_keys=keys(), casbin_policy=policy, policy_check_interval_s=0
    )
    async with app_client(settings) as c:
        yield c
        assert postcheck_drops(c) == 0


def hdr(mode: IdentityMode | str) -> dict[str, str]:
    secret = ADMIN if mode == "admin" else SECRETS[IdentityMode(mode)]
    return {"Authorization": f"Bearer {secret}"}


def dify_body(query: str, *conditions: dict[str, Any], kb: str = SAMPLES_KB) -> dict[str, Any]:
    body: dict[str, Any] = {
        "knowledge_id": kb,
        "query": query,
        "retrieval_setting": {"top_k": 10, "score_threshold": 0},
    }
    if conditions:
        body["metadata_condition"] = {
            "logical_operator": "and",
            "conditions": minted(list(conditions)),  # tokens are minted now, not at collection
        }
    return body


def cond(name: str, value: Any, op: str = "contains") -> dict[str, Any]:
    return {"name": name, "comparison_operator": op, "value": value}


def sign(**claims: Any) -> Token:
    """A principal token for tenant acme, minted when the request is built."""
    return Token(SECRET, {"tenant": "acme", **claims})


async def titles(client: httpx.AsyncClient, mode: IdentityMode, body: dict[str, Any]) -> set[str]:
    resp = await client.post("/retrieval", json=body, headers=hdr(mode))
    assert resp.status_code == 200, resp.text
    return {r["title"] for r in resp.json()["records"]}


POWER = "配电房设备参数与操作规程"  # access_roles ["运维工程师", "物业经理"]
PATROL = "巡更操作指南 v2.1"  # no access_roles: public
QUERY = "配电房倒闸操作 巡更路线"


@pytest.mark.parametrize(
    ("mode", "conditions", "sees_power"),
    [
        # The seed's worked case: a document for 运维工程师 and 物业经理, an unrestricted one.
        pytest.param(
            IdentityMode.TRUSTED,
            [cond("access_roles", '["物业经理"]')],
            True,
            id="trusted-role-claim-intersects",
        ),
        pytest.param(
            IdentityMode.TRUSTED, [cond("user_roles", "保洁主管")], False, id="trusted-other-role"
        ),
        pytest.param(IdentityMode.TRUSTED, [], False, id="trusted-anonymous"),
        pytest.param(
            IdentityMode.CASBIN, [cond("user_id", "li", "is")], True, id="casbin-user-with-role"
        ),
        pytest.param(
            IdentityMode.CASBIN,
            [cond("user_id", "zhao", "is")],
            False,
            id="casbin-user-without-role",
        ),
        pytest.param(
            IdentityMode.SIGNED,
            [cond("principal_token", sign(sub="wang"), "is")],
            True,
            id="signed-token-user-inherits",
        ),
        pytest.param(
            IdentityMode.SIGNED,
            [cond("principal_token", sign(roles=["保洁主管"]), "is")],
            False,
            id="signed-token-other-role",
        ),
        pytest.param(
            IdentityMode.FIXED,
            [cond("access_roles", "保洁主管")],
            True,
            id="fixed-key-role-ignores-claims",
        ),
    ],
)
async def test_seed_case_by_mode(
    client: httpx.AsyncClient,
    mode: IdentityMode,
    conditions: list[dict[str, Any]],
    sees_power: bool,
) -> None:
    seen = await titles(client, mode, dify_body(QUERY, *conditions))
    assert PATROL in seen  # the unrestricted document is never hidden
    assert (POWER in seen) is sees_power


@pytest.mark.parametrize(
    ("mode", "conditions", "status"),
    [
        pytest.param(
            IdentityMode.CASBIN,
            [cond("access_roles", "物业经理")],
            403,
            id="casbin-refuses-role-claim",
        ),
        pytest.param(
            IdentityMode.SIGNED,
            [cond("user_roles", "物业经理")],
            403,
            id="signed-refuses-plain-roles",
        ),
        pytest.param(
            IdentityMode.SIGNED,
            [cond("principal_token", "forged.token.x", "is")],
            401,
            id="signed-bad-token",
        ),
        pytest.param(
            IdentityMode.SIGNED,
            [cond("principal_token", sign(sub="wang", exp=EXPIRED_AT), "is")],
            401,
            id="signed-expired-token",
        ),
    ],
)
async def test_refused_claims(
    client: httpx.AsyncClient, mode: IdentityMode, conditions: list[dict[str, Any]], status: int
) -> None:
    resp = await client.post("/retrieval", json=dify_body(QUERY, *conditions), headers=hdr(mode))
    assert resp.status_code == status
    assert resp.json()["error_code"] == 1002


async def test_filters_only_narrow(client: httpx.AsyncClient) -> None:
    # Aiming a filter at a restricted document cannot reveal it to someone without the role.
    body = dify_body(QUERY, cond("user_roles", "保洁主管"), cond("category", "设备", "is"))
    assert POWER not in await titles(client, IdentityMode.TRUSTED, body)
    native = {
        "query": QUERY,
        "knowledge_ids": [SAMPLES_KB],
        "top_k": 10,
        "principal": {"roles": ["保洁主管"]},
        "filter": {
            "or": [
                {"field": "access_roles", "op": "any", "value": ["物业经理"]},
                {"field": "access_roles", "op": "missing"},
            ]
        },
    }
    resp = await client.post("/v1/search", json=native, headers=hdr(IdentityMode.TRUSTED))
    assert resp.status_code == 200
    seen = {c["document_title"] for c in resp.json()["chunk_metadata"]}
    assert POWER not in seen and PATROL in seen


async def test_access_roles_condition_is_a_claim_not_a_filter(client: httpx.AsyncClient) -> None:
    # design.md §7: for Dify, access_roles names the caller's roles; only trusted keys may say so.
    body = dify_body(QUERY, cond("access_roles", "物业经理", "is"))
    assert POWER in await titles(client, IdentityMode.TRUSTED, body)
    resp = await client.post("/retrieval", json=body, headers=hdr(IdentityMode.CASBIN))
    assert resp.status_code == 403


async def test_kb_policy_denies(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/retrieval", json=dify_body("费用", kb="finance-2026"), headers=hdr(IdentityMode.TRUSTED)
    )
    assert resp.status_code == 403
    assert "no policy" in resp.json()["error_msg"]
    allowed = await client.post(
        "/retrieval",
        json=dify_body("费用", cond("user_roles", "财务专员"), kb="finance-2026"),
        headers=hdr(IdentityMode.TRUSTED),
    )
    assert allowed.status_code == 404  # permitted, but no such knowledge base is indexed


def reloads(client: httpx.AsyncClient, outcome: str) -> float:
    return metric_sample(client, "rsvc_policy_reloads_total", {"outcome": outcome}) or 0.0


def loaded_at(client: httpx.AsyncClient) -> float:
    value = metric_sample(client, "rsvc_policy_loaded_timestamp_seconds")
    assert value is not None
    return value


async def until(predicate: Any, what: str) -> None:
    """Wait (bounded, generously: the machine may be slow) for the policy watcher to act."""
    deadline = time.monotonic() + 120
    while not await predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_policy_change_without_restart(client: httpx.AsyncClient, policy: Path) -> None:
    body = dify_body(QUERY, cond("user_id", "zhao", "is"))
    assert POWER not in await titles(client, IdentityMode.CASBIN, body)
    started = loaded_at(client)
    changed = time.time()
    assert started <= changed
    policy.write_text(POLICY + "g, user:zhao, 运维工程师, acme\n", encoding="utf-8")
    os.utime(policy, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))

    async def granted() -> bool:
        return POWER in await titles(client, IdentityMode.CASBIN, body)

    await until(granted, "the policy change never took effect")
    reloaded = loaded_at(client)
    assert reloaded >= changed
    # A line that means nothing is skipped, counted, and the rest stays in force.
    policy.write_text(POLICY + "g, user:zhao, 运维工程师, acme\np, broken\n", encoding="utf-8")
    os.utime(policy, ns=(time.time_ns(), time.time_ns() + 2_000_000_000))

    async def skipped() -> bool:
        return metric_sample(client, "rsvc_policy_lines_skipped") == 1

    await until(skipped, "the broken line was never looked at")
    assert POWER in await titles(client, IdentityMode.CASBIN, body)
    # A policy that cannot be read at all is refused and the last good one stays in force.
    kept = loaded_at(client)
    policy.write_bytes(b"p, \xff\xfe, acme, *, read\n")
    os.utime(policy, ns=(time.time_ns(), time.time_ns() + 3_000_000_000))

    async def refused() -> bool:
        return reloads(client, "error") >= 1

    await until(refused, "the unreadable policy was never looked at")
    assert POWER in await titles(client, IdentityMode.CASBIN, body)
    assert loaded_at(client) == kept  # the policy in force is still the one loaded then


async def test_a_slow_reload_never_holds_a_request(
    client: httpx.AsyncClient, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reload blocks until the test lets it go — which the test does only after a request
    # has been answered. A reload inside a request (or on the event loop) could never let
    # that request finish first: the wait below would time out and the ordering fail.
    from retrieval_svc.acl import casbin_acl

    started, release = threading.Event(), threading.Event()
    real_compile = casbin_acl._Compiler.compile

    async def slow_compile(self: Any, source: Any) -> Any:
        started.set()
        await asyncio.to_thread(release.wait, 60)
        return await real_compile(self, source)  # the real child process

    monkeypatch.setattr(casbin_acl._Compiler, "compile", slow_compile)
    policy.write_text(POLICY + "g, user:zhao, 运维工程师, acme\n", encoding="utf-8")
    os.utime(policy, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    assert await asyncio.to_thread(started.wait, 30), "the watcher never started a reload"
    body = dify_body(QUERY, cond("user_id", "zhao", "is"))
    during = await titles(client, IdentityMode.CASBIN, body)  # answered mid-reload
    assert not release.is_set() and POWER not in during  # the old policy, still in force
    release.set()

    async def granted() -> bool:
        return POWER in await titles(client, IdentityMode.CASBIN, body)

    await until(granted, "the slow reload never swapped in")


async def test_explain(client: httpx.AsyncClient, corpus: str) -> None:
    search = await client.post(
        "/v1/search",
        json={"query": QUERY, "knowledge_ids": [SAMPLES_KB], "principal": {"roles": ["物业经理"]}},
        headers=hdr(IdentityMode.TRUSTED),
    )
    power = next(c for c in search.json()["chunk_metadata"] if c["document_title"] == POWER)

    async def explain(principal: dict[str, Any]) -> dict[str, Any]:
        resp = await client.post(
            "/v1/explain",
            json={"principal": principal, "chunk_id": power["chunk_id"]},
            headers=hdr("admin"),
        )
        assert resp.status_code == 200, resp.text
        out: dict[str, Any] = resp.json()
        return out

    wang = await explain({"user_id": "wang"})
    # A person the tenant knows also holds Windows' Everyone and Authenticated Users.
    assert wang["principal"]["effective_roles"] == [
        "sid:S-1-1-0", "sid:S-1-5-11", "物业经理", "运维工程师",
    ]  # fmt: skip
    (chunk,) = wang["chunks"]
    assert chunk["visible"] is True
    assert chunk["acl"]["matched_roles"] == ["物业经理", "运维工程师"]
    assert chunk["acl"]["set_by"] == "front matter"  # what set the roles (design.md §16)
    assert chunk["knowledge_base"]["readable"] is True

    zhao = (await explain({"user_id": "zhao"}))["chunks"][0]
    assert zhao["visible"] is False
    assert zhao["acl"]["rule"].startswith("restricted")
    assert zhao["acl"]["access_roles"] == ["物业经理", "运维工程师"]

    not_admin = await client.post(
        "/v1/explain", json={"chunk_id": "x"}, headers=hdr(IdentityMode.TRUSTED)
    )
    assert not_admin.status_code == 403
    missing = await client.post("/v1/explain", json={"chunk_id": "nope"}, headers=hdr("admin"))
    assert missing.json()["found"] is False


async def test_a_role_granted_in_postgresql_reaches_retrieval_without_restart(
    corpus: str, postgres_url: str, tmp_path: Path
) -> None:
    # The policy in the suite's PostgreSQL, changed with the `retrieval-svc policy` commands
    # while the service runs: the watcher's stamp query notices, a child process reloads.
    import sqlalchemy
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as cli

    name = f"policy_e2e_{os.getpid()}_{time.time_ns()}"
    engine = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    source = tmp_path / "policy.csv"
    source.write_text(POLICY, encoding="utf-8")

    def command(*args: str) -> str:
        result = CliRunner().invoke(cli, ["policy", "--db", url, *args])
        assert result.exit_code == 0, result.stderr
        return result.stdout

    assert command("import", str(source)).startswith("imported 7 rules")
    settings = make_settings(corpus, api_keys=keys(), casbin_db_url=url, policy_check_interval_s=0)
    body = dify_body(QUERY, cond("user_id", "zhao", "is"))
    async with app_client(settings) as client:
        assert POWER not in await titles(client, IdentityMode.CASBIN, body)
        assert command("grant-role", "zhao", "运维工程师", "--tenant", "acme").startswith("done")

        async def granted() -> bool:
            return POWER in await titles(client, IdentityMode.CASBIN, body)

        await until(granted, "the role granted in PostgreSQL never reached /retrieval")
        command("revoke-role", "zhao", "运维工程师", "--tenant", "acme")

        async def revoked() -> bool:
            return POWER not in await titles(client, IdentityMode.CASBIN, body)

        await until(revoked, "the revoked role stayed in force")
        assert postcheck_drops(client) == 0
