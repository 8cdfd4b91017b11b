"""A refusal over MCP is seen where the operator looks, as on the HTTP routes: counted in
``rsvc_refusals_total{route="/mcp",key,reason}`` and kept for the console's *Knowledge bases*
page — whether the connection was refused (no key, no identity header, an identity that is no
one's) or a tool call (a knowledge base the key may not read, a malformed filter). A document
``read_document`` does not find is an answer, not a refusal: hidden reads exactly as absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_mcp_es import oauth_settings
from tests.integration.test_oidc_es import (  # noqa: F401 (fixtures: the local OIDC provider)
    Provider,
    policy,
    provider,
    signing_keys,
)
from tests.support import app_client, auth, key_entry, make_settings, metric_sample
from tests.support.corpus import SAMPLES_KB
from tests.support.mcp import MCP_HEADERS, rpc

pytestmark = pytest.mark.anyio


def refusals(client: httpx.AsyncClient, key: str, reason: str) -> float:
    labels = {"route": "/mcp", "key": key, "reason": reason}
    return metric_sample(client, "rsvc_refusals_total", labels) or 0.0


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": tool, "arguments": arguments})


async def test_refused_connections_and_tool_calls_are_counted_by_key_and_reason(
    corpus: str,
) -> None:
    settings = make_settings(
        corpus,
        api_keys=[
            key_entry("anon", tenant="acme", unknown_user="refuse"),
            key_entry("scoped", tenant="acme", knowledge_ids=("other-*",)),
        ],
    )
    visitor, template = {"X-Rsvc-User": "visitor"}, {"X-Rsvc-User": "{{sys.user_id}}"}
    tools = rpc("tools/list")
    search = call("search", query="巡更", knowledge_ids=[SAMPLES_KB])
    refused = [  # (headers, body, expected HTTP status, key label, reason)
        ({}, tools, 401, "-", "malformed_authorization"),
        ({"Authorization": "Bearer not-a-key-0123456789"}, tools, 401, "-", "wrong_key"),
        (auth("anon"), tools, 403, "anon", "no_identity"),  # no X-Rsvc-User
        ({**auth("anon"), **visitor}, tools, 403, "anon", "unknown_user"),
        ({**auth("anon"), **template}, tools, 400, "anon", "template_identity"),
        ({**auth("scoped"), **visitor}, search, 200, "scoped", "key_scope"),
        (
            {**auth("scoped"), **visitor},
            call("search", query="巡更", knowledge_ids=["other-kb"], filter={"op": "eq"}),
            200,
            "scoped",
            "bad_condition",
        ),
    ]
    async with app_client(settings) as c:
        for headers, body, status, key, reason in refused:
            before = refusals(c, key, reason)
            resp = await c.post("/mcp", json=body, headers={**MCP_HEADERS, **headers})
            assert resp.status_code == status, (reason, resp.text)
            answer = resp.json()
            assert "error" in answer or answer["result"]["isError"], (reason, answer)
            assert refusals(c, key, reason) == before + 1, (reason, resp.text)
        state = c._transport.app.state.rsvc  # type: ignore[attr-defined]
        kept = {(r.key, r.reason): r for r in state.refusals.recent("acme")}
        assert {("anon", "unknown_user"), ("scoped", "key_scope")} <= set(kept), kept
        assert SAMPLES_KB in kept[("scoped", "key_scope")].knowledge_id
        # Not a refusal: a document read_document finds none of (absent or hidden alike).
        counted = sum(refusals(c, k, r) for _, _, _, k, r in refused)
        missing = call("read_document", document_id="no-such-document")
        headers = {**MCP_HEADERS, **auth("scoped"), **visitor}
        resp = await c.post("/mcp", json=missing, headers=headers)
        assert resp.json()["result"]["isError"], resp.text
        assert sum(refusals(c, k, r) for _, _, _, k, r in refused) == counted


async def test_refused_oidc_callers_are_counted(
    corpus: str,
    policy: Path,  # noqa: F811
    provider: Provider,  # noqa: F811
) -> None:
    async with app_client(oauth_settings(corpus, policy, provider)) as c:
        for headers, reason in (
            ({}, "malformed_authorization"),
            ({"Authorization": "Bearer garbage"}, "invalid_token"),
        ):
            resp = await c.post("/mcp", json=rpc("tools/list"), headers={**MCP_HEADERS, **headers})
            assert resp.status_code == 401, resp.text
            assert refusals(c, "mcp-oidc", reason) == 1, reason
