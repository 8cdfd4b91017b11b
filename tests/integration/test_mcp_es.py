"""MCP at /mcp (issue #27; design.md §13): the SDK's own client against the service, live and
in-process; API keys and the end user's OIDC token; hostile input."""

from __future__ import annotations

import hmac
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from mcp.shared.exceptions import MCPError

from retrieval_svc.app import create_app
from retrieval_svc.auth.keys import IdentityMode, hash_key
from tests.integration.test_oidc_es import (  # noqa: F401 (fixtures: the local OIDC provider)
    AUDIENCE,
    POLICY,
    Provider,
    b64,
    policy,
    provider,
    signing_keys,
)
from tests.support import KEYS, app_client, auth, key_entry, make_settings
from tests.support.corpus import ACL_DOCS, ACL_KB, SAMPLES_KB
from tests.support.live import live_service, serve_env
from tests.support.mcp import MCP_HEADERS, mcp_session, rpc

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

# A trusted key's claims, as the application sets them when it connects (percent-encoded: the
# SDK's HTTP client sends ASCII headers only). A visitor is a user id with no grant: public only.
MANAGER = {"X-Rsvc-Roles": quote("物业经理")}
VISITOR = {"X-Rsvc-User": "visitor"}
IDENTITY_ARGUMENTS = {"user_id", "user_roles", "principal_token"}
QUERY = {"query": "消防演练", "knowledge_ids": [SAMPLES_KB, ACL_KB], "top_k": 10}
MANAGER_ONLY = {d for d, acl in ACL_DOCS.items() if acl.get("access_roles")}


@pytest.fixture(scope="module")
def live(corpus: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``retrieval-svc serve`` on loopback with a trusted key of tenant acme."""
    folder = tmp_path_factory.mktemp("mcp")
    keys = folder / "keys.json"
    keys.write_text(
        json.dumps([{"name": "anon", "sha256": hash_key(KEYS["anon"]), "tenant": "acme",
                     "mode": "trusted"}])
    )  # fmt: skip
    with live_service(serve_env(corpus, keys), folder) as (url, _child):
        yield url


async def test_a_client_gets_what_v1_search_gives_each_principal(live: str) -> None:
    key = {"Authorization": f"Bearer {KEYS['anon']}"}
    got = {}
    for who, headers, roles in (("visitor", VISITOR, None), ("manager", MANAGER, ["物业经理"])):
        async with mcp_session(live, {**key, **headers}) as session:
            listed = await session.list_tools()
            assert {t.name for t in listed.tools} == {
                "search",
                "list_knowledge_bases",
                "read_document",
            }
            search = next(t for t in listed.tools if t.name == "search")
            assert search.output_schema and "chunk_metadata" in search.output_schema["properties"]
            result = await session.call_tool("search", QUERY)
            assert not result.is_error, result.content
            ids = [c["chunk_id"] for c in result.structured_content["chunk_metadata"]]
            assert result.content[0].text.startswith("[C:1]")
            principal = {"roles": roles} if roles else {"user_id": "visitor"}
            body = {**QUERY, "principal": principal}
            http = httpx.post(f"{live}/v1/search", json=body, headers=key, timeout=30).json()
            assert ids == [c["chunk_id"] for c in http["chunk_metadata"]], who
            got[who] = set(ids)
    assert MANAGER_ONLY <= got["manager"] and not MANAGER_ONLY & got["visitor"]


async def test_list_and_read_show_only_what_the_principal_sees(live: str) -> None:
    key = {"Authorization": f"Bearer {KEYS['anon']}"}
    async with mcp_session(live, {**key, **VISITOR}) as session:
        listed = await session.call_tool("list_knowledge_bases", {})
        kbs = {kb["knowledge_id"]: kb for kb in listed.structured_content["knowledge_bases"]}
        assert SAMPLES_KB in kbs and "my-kb" not in kbs  # (another tenant's)
        hidden = await session.call_tool("read_document", {"document_id": "acl-mgr"})
        absent = await session.call_tool("read_document", {"document_id": "acl-zzz"})
        assert hidden.is_error and absent.is_error
        assert hidden.content[0].text.replace("acl-mgr", "X") == absent.content[0].text.replace(
            "acl-zzz", "X"
        )
    async with mcp_session(live, {**key, **MANAGER}) as session:
        as_manager = await session.call_tool("list_knowledge_bases", {})
        more = {kb["knowledge_id"]: kb for kb in as_manager.structured_content["knowledge_bases"]}
        assert more[ACL_KB]["chunks"] > kbs[ACL_KB]["chunks"]  # counts are what each sees
        seen = await session.call_tool("read_document", {"document_id": "acl-mgr"})
        assert not seen.is_error and seen.structured_content["chunks"][0]["chunk_id"] == "acl-mgr"


async def test_the_model_cannot_set_identity(live: str) -> None:
    # Issue #36 §1: a prompt injected into a passage asks for more roles, another user, a token.
    key = {"Authorization": f"Bearer {KEYS['anon']}"}
    injected = {"user_roles": ["物业经理", "exec"], "user_id": "wang", "principal_token": "x.y.z"}
    async with mcp_session(live, {**key, **VISITOR}) as session:
        for tool in (await session.list_tools()).tools:
            offered = set(tool.input_schema.get("properties", {}))
            assert not offered & IDENTITY_ARGUMENTS, (tool.name, offered)
        calls = {
            "search": QUERY,
            "list_knowledge_bases": {},
            "read_document": {"document_id": "acl-mgr"},
        }
        plain, widened = {}, {}
        for tool, arguments in calls.items():
            plain[tool] = await session.call_tool(tool, arguments)
            widened[tool] = await session.call_tool(tool, {**arguments, **injected})
    for tool in calls:  # ignored or refused: never more than the connection's principal sees
        if not widened[tool].is_error:
            assert widened[tool].structured_content == plain[tool].structured_content, tool
    assert plain["read_document"].is_error
    ids = {c["chunk_id"] for c in plain["search"].structured_content["chunk_metadata"]}
    assert not MANAGER_ONLY & ids


async def test_a_key_mode_without_its_header_is_refused_at_connection(
    corpus: str, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.csv"
    policy_file.write_text(POLICY + "g, user:王芳, 物业经理, acme\n", encoding="utf-8")
    settings = make_settings(
        corpus,
        casbin_policy=policy_file,
        api_keys=[
            key_entry("anon", tenant="acme", mode=IdentityMode.CASBIN),
            key_entry("ops", tenant="acme", mode=IdentityMode.FIXED, roles=("运维工程师",)),
            key_entry("scoped", tenant="acme", mode=IdentityMode.SIGNED, token_secret="s" * 32),
        ],
    )
    tools = rpc("tools/list")
    async with app_client(settings) as c:
        for name, needs in (("anon", "X-Rsvc-User"), ("scoped", "X-Rsvc-Principal-Token")):
            resp = await c.post("/mcp", json=tools, headers={**MCP_HEADERS, **auth(name)})
            assert resp.status_code == 403, resp.text
            error = resp.json()["error"]  # a JSON-RPC error, the service's code in its data
            assert needs in error["message"] and error["data"]["error_code"] == 1002
        fixed = await c.post("/mcp", json=tools, headers={**MCP_HEADERS, **auth("ops")})
        assert fixed.status_code == 200, fixed.text
        # A claim the mode does not take is refused too, as on every route.
        roles = {**MCP_HEADERS, **auth("anon"), "X-Rsvc-Roles": "exec"}
        assert (await c.post("/mcp", json=tools, headers=roles)).status_code == 403
        twice = [
            *{**MCP_HEADERS, **auth("anon")}.items(),
            ("X-Rsvc-User", "a"),
            ("X-Rsvc-User", "b"),
        ]
        assert (await c.post("/mcp", json=tools, headers=twice)).status_code == 400
    # The user comes from the header, raw UTF-8 or percent-encoded: Casbin gives 王芳 物业经理.
    call = rpc("tools/call", {"name": "search", "arguments": {**QUERY, "knowledge_ids": [ACL_KB]}})
    async with app_client(settings) as c:
        for user in ("王芳".encode(), quote("王芳").encode(), b"visitor"):
            headers = [(k.encode(), v.encode()) for k, v in {**MCP_HEADERS, **auth("anon")}.items()]
            resp = await c.post("/mcp", json=call, headers=[*headers, (b"X-Rsvc-User", user)])
            assert resp.status_code == 200, resp.text
            found = resp.json()["result"]["structuredContent"]["chunk_metadata"]
            ids = {chunk["chunk_id"] for chunk in found}
            assert (MANAGER_ONLY <= ids) == (user != b"visitor"), (user, ids)


async def test_get_opens_no_stream(corpus: str) -> None:
    # Issue #36 §5: GET /mcp opened an SSE stream the server never closed.
    async with app_client(make_settings(corpus)) as c:
        headers = {**MCP_HEADERS, **auth("anon"), **VISITOR, "Accept": "text/event-stream"}
        resp = await c.get("/mcp", headers=headers)
    assert resp.status_code == 405 and "POST" in resp.headers["allow"], resp.text


async def test_the_sdk_client_shows_why_a_connection_was_refused(corpus: str) -> None:
    # Before, the SDK showed "Server returned an error response" for a missing header.
    from tests.support.mcp import mcp_session

    for headers, says in (
        (auth("anon"), "X-Rsvc-User"),
        ({"Authorization": "Bearer not-a-key-0123456789"}, "the API key is not valid"),
    ):
        with pytest.raises(BaseException) as raised:  # (the SDK's task group wraps it)
            async with mcp_session(create_app(make_settings(corpus)), headers):
                pass
        refused = _innermost(raised.value, MCPError)
        assert says.lower() in refused.message.lower(), refused
        assert refused.error.data["error_code"] in (1001, 1002)


def _innermost(exc: BaseException, kind: type[MCPError]) -> MCPError:
    """The ``kind`` exception in ``exc`` or its exception groups."""
    if isinstance(exc, kind):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        try:
            return _innermost(inner, kind)
        except LookupError:
            continue
    raise LookupError(f"no {kind.__name__} in {exc!r}")


async def test_without_a_key_nothing_is_served(corpus: str) -> None:
    async with app_client(make_settings(corpus)) as c:
        for headers in ({}, {"Authorization": "Bearer not-a-key-0123456789"}):
            resp = await c.post("/mcp", json=rpc("tools/list"), headers={**MCP_HEADERS, **headers})
            error = resp.json()["error"]
            assert resp.status_code == 401 and error["data"]["error_code"] in (1001, 1002)


HOSTILE = [
    pytest.param(b"{not json", id="malformed-json"),
    pytest.param(json.dumps({"jsonrpc": "2.0", "id": 1}).encode(), id="no-method"),
    pytest.param(json.dumps(rpc("tools/call", {"name": "nope", "arguments": {}})), id="unknown"),
    pytest.param(
        json.dumps(rpc("tools/call", {"name": "search", "arguments": {"query": 5, "top_k": "x"}})),
        id="wrong-types",
    ),
    pytest.param(
        json.dumps(
            rpc(
                "tools/call",
                {
                    "name": "search",
                    "arguments": {"query": "巡" * 300_000, "knowledge_ids": [SAMPLES_KB]},
                },
            )
        ),
        id="megabyte-argument",
    ),
    pytest.param(
        json.dumps(
            rpc(
                "tools/call",
                {
                    "name": "search",
                    "arguments": {"query": "巡更", "knowledge_ids": [f"k{i}" for i in range(5000)]},
                },
            )
        ),
        id="many-knowledge-ids",
    ),
    pytest.param(json.dumps([rpc("tools/list")] * 500), id="batch"),
]


@pytest.mark.parametrize("payload", HOSTILE)
async def test_hostile_input_is_an_error_never_a_500(corpus: str, payload: Any) -> None:
    async with app_client(make_settings(corpus)) as c:
        started = time.perf_counter()
        resp = await c.post(
            "/mcp",
            content=payload,
            headers={
                **MCP_HEADERS,
                **auth("anon"),
                **VISITOR,  # (past the identity check: the MCP layer itself gets the input)
                "Mcp-Session-Id": "someone-elses-session",
            },
        )
        took = time.perf_counter() - started
    assert resp.status_code < 500, resp.text[:300]
    assert took < 5, took
    if resp.status_code == 200:
        body = resp.json()
        assert "error" in body or body["result"].get("isError"), str(body)[:300]


async def test_the_query_is_the_pipeline_s(corpus: str) -> None:
    # One pipeline: the same deadline, limits and metrics as every route.
    app = create_app(make_settings(corpus))
    async with mcp_session(app, {**auth("anon"), **VISITOR}) as session:
        await session.call_tool("search", {"query": "巡更", "knowledge_ids": [SAMPLES_KB]})
    text = app.state.rsvc.metrics.exposition().decode()
    assert 'route="/mcp"' in text


# OAuth resource-server mode: the end user's own token from the company's provider.


def oauth_settings(corpus: str, policy: Path, provider: Provider) -> Any:  # noqa: F811
    return make_settings(
        corpus,
        api_keys=[key_entry("anon", tenant="acme")],
        casbin_policy=policy,
        oidc_issuer=provider.url,
        oidc_audience=[AUDIENCE],
        oidc_roles_claim="realm_access.roles",
        oidc_jwks_min_refresh_s=3600,
        mcp_auth="oidc",
        mcp_tenant="acme",
    )


async def test_oauth_user_tokens(corpus: str, policy: Path, provider: Provider) -> None:  # noqa: F811
    query = {"query": "消防演练", "knowledge_ids": [ACL_KB], "top_k": 10}
    seen = {}
    for who, roles in (("manager", ["物业经理"]), ("nobody", [])):
        token = provider.token(sub=f"u-{who}", realm_access={"roles": roles})
        app = create_app(oauth_settings(corpus, policy, provider))  # (a lifespan runs once)
        async with mcp_session(app, {"Authorization": f"Bearer {token}"}) as session:
            result = await session.call_tool("search", query)
            assert not result.is_error, result.content
            seen[who] = {c["chunk_id"] for c in result.structured_content["chunk_metadata"]}
    assert MANAGER_ONLY <= seen["manager"] and not MANAGER_ONLY & seen["nobody"]


async def test_oauth_refusals_carry_the_challenge(
    corpus: str,
    policy: Path,  # noqa: F811
    provider: Provider,  # noqa: F811
) -> None:
    expired = provider.token(sub="w", exp=int(time.time()) - 600, iat=int(time.time()) - 900)
    wrong_audience = provider.token(sub="w", aud="another-client")
    payload = {"iss": provider.url, "aud": AUDIENCE, "sub": "w", "exp": int(time.time()) + 300}
    unsigned = jwt.encode(payload, None, algorithm="none", headers={"kid": "rsa-1"})
    public_pem = (
        provider.keys[0]
        .private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_input = ".".join(  # HS256 "signed" with the provider's public key
        b64(json.dumps(part).encode())
        for part in ({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, payload)
    )
    confused = (
        f"{signing_input}.{b64(hmac.new(public_pem, signing_input.encode(), sha256).digest())}"
    )
    metadata_url = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
    async with app_client(oauth_settings(corpus, policy, provider)) as c:
        for token in (None, expired, wrong_audience, unsigned, confused, "garbage"):
            headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
            resp = await c.post("/mcp", json=rpc("tools/list"), headers=headers)
            assert resp.status_code == 401, (token, resp.text)
            challenge = resp.headers["www-authenticate"]
            assert (
                challenge.startswith("Bearer")
                and f'resource_metadata="{metadata_url}"' in challenge
            )
        document = await c.get(
            "/.well-known/oauth-protected-resource/mcp", headers={"Host": "127.0.0.1:8080"}
        )
    assert document.status_code == 200, document.text
    meta = document.json()  # RFC 9728 §2: resource is required; the servers that issue tokens
    assert meta["resource"] == "http://127.0.0.1:8080/mcp"
    assert meta["authorization_servers"] == [provider.url]


def test_the_readme_s_python_runs_as_printed(live: str, tmp_path: Path) -> None:
    # Issue #36 §7: README's client was a top-level `async with` (a SyntaxError) with an
    # undefined key. Every Python client of README, docs/api.md (where the MCP section moved,
    # issue #50) and examples/ runs here, as printed.
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", root / "docs" / "api.md", *(root / "examples").glob("**/*.md")]
    blocks = [
        block
        for doc in sorted(pages)
        for block in re.findall(r"^```python\n(.*?)^```", doc.read_text("utf-8"), re.S | re.M)
    ]
    assert blocks, "no Python block found"
    env = {**os.environ, "RSVC_KEY": KEYS["anon"], "RSVC_URL": live}
    for i, block in enumerate(blocks):
        script = tmp_path / f"block{i}.py"
        script.write_text(block, encoding="utf-8")
        run = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, (block, run.stderr[-2000:])
        assert "[C:1]" in run.stdout and "配电房" in run.stdout, run.stdout[:500]


async def test_knowledge_ids_as_comma_text_over_mcp(live: str) -> None:
    key = {"Authorization": f"Bearer {KEYS['anon']}", **MANAGER}
    async with mcp_session(live, key) as session:
        as_list = await session.call_tool("search", QUERY)
        as_text = await session.call_tool(
            "search", {**QUERY, "knowledge_ids": ",".join(QUERY["knowledge_ids"])}
        )
    assert not as_text.is_error, as_text.content
    assert as_text.structured_content == as_list.structured_content
