"""Hostile input: malformed trees and conditions are 400s (never crashes), values stay
literals, bodies have a size limit (design.md §5, §7; issue #8)."""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from datetime import UTC
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_svc.auth.keys import ApiKeyConfig, KeyStore, hash_key
from retrieval_svc.dify.schemas import MetadataCondition
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest
from retrieval_svc.filters import FieldCatalog, Kind, compile_filter, parse_filter
from retrieval_svc.filters.dify import translate
from retrieval_svc.filters.dify_compiler import compile_dify
from tests.support import DIFY_DESIGN_OPERATORS, app_client, auth, make_settings, postcheck_drops
from tests.support.corpus import FILTER_KB, SAMPLES_KB

CATALOG = FieldCatalog(
    {
        "metadata.category": Kind.KEYWORD,
        "metadata.year": Kind.NUMBER,
        "metadata.effective": Kind.DATE,
        "metadata.draft": Kind.BOOLEAN,
    }
)
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "category",
        "year",
        "effective",
        "draft",
        "content",
        "access_roles",
        "segment_position",
        "nope",
        "",
    ]
) | st.text(max_size=10)
OPS = st.sampled_from(
    [
        "eq",
        "ne",
        "in",
        "nin",
        "any",
        "all",
        "none",
        "contains",
        "not_contains",
        "prefix",
        "suffix",
        "gt",
        "gte",
        "lt",
        "lte",
        "between",
        "exists",
        "missing",
        "before",
        "after",
        "like",
        "",
    ]
)
CONDITION = st.fixed_dictionaries({"field": FIELDS, "op": OPS}, optional={"value": JSON})
TREES = st.recursive(
    CONDITION | JSON,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"and": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda xs: {"or": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(TREES)
def test_any_filter_json_compiles_or_is_a_400(raw: Any) -> None:
    try:
        compiled = compile_filter(parse_filter(raw), CATALOG)
    except InvalidRequest as exc:
        assert exc.status_code == 400 and exc.path and exc.path.startswith("filter")
    else:
        json.dumps(compiled)  # a plain JSON query, nothing else


DIFY_OPS = st.sampled_from([*DIFY_DESIGN_OPERATORS, "~", ""])
DIFY_NAMES = st.sampled_from(
    ["category", "year", "user_id", "user_roles", "access_roles", "principal_token", "", "nope"]
) | st.lists(st.text(max_size=5), max_size=2)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries({"name": DIFY_NAMES, "comparison_operator": DIFY_OPS, "value": JSON}),
        max_size=5,
    ),
    st.sampled_from(["and", "or", None]),
)
def test_any_dify_condition_translates_or_is_a_400(conditions: list[Any], logical: Any) -> None:
    try:
        condition = MetadataCondition.model_validate(
            {"logical_operator": logical, "conditions": conditions}
        )
    except ValueError:
        return  # the request model refuses it: FastAPI answers 400
    try:
        tree, _claims = translate(condition)
        if tree is not None:
            compile_dify(tree, CATALOG, UTC)
    except InvalidRequest as exc:
        assert exc.path and exc.path.startswith("metadata_condition")


def test_key_lookup_compares_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [ApiKeyConfig(name=f"k{i}", sha256=hash_key(f"secret-{i}-0123")) for i in range(5)]
    store = KeyStore(keys)
    calls: list[int] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for presented in ("secret-0-0123", "secret-4-0123", "wrong"):
        calls.clear()
        try:
            store.lookup(presented)
        except AuthorizationFailed:
            pass
        assert len(calls) == 5, "timing must not depend on which key matched"


@pytest.fixture
async def client(corpus: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(corpus, max_body_bytes=4096)) as c:
        yield c
        assert postcheck_drops(c) == 0


@pytest.mark.anyio
async def test_oversized_bodies_are_413(client: httpx.AsyncClient) -> None:
    big = {"knowledge_id": SAMPLES_KB, "query": "巡" * 3000, "retrieval_setting": {"top_k": 1}}
    declared = await client.post("/retrieval", json=big, headers=auth("anon"))
    assert declared.status_code == 413
    assert declared.json()["error_code"] == 3001  # in the documented table (#12)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 1000

    streamed = await client.post(
        "/v1/search", content=chunks(), headers={**auth("anon"), "Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    small = await client.post("/retrieval", json={**big, "query": "巡更"}, headers=auth("anon"))
    assert small.status_code == 200


HOSTILE = [
    '*) OR access_roles:* {"match_all":{}}',
    "title:巡更 AND NOT access_roles:物业经理",
    '\\"; DROP TABLE chunks; --',
    "巡更\u0000\u0007\u001b[31m",
    "🚒🧯 巡检 \u202e反转",
    "a" * 1000,
]


@pytest.mark.anyio
@pytest.mark.parametrize("value", HOSTILE)
async def test_hostile_values_are_literals(client: httpx.AsyncClient, value: str) -> None:
    query = await client.post(
        "/v1/search", json={"query": value, "knowledge_ids": [FILTER_KB]}, headers=auth("anon")
    )
    assert query.status_code == 200
    filtered = await client.post(
        "/v1/search",
        json={
            "query": "通用",
            "knowledge_ids": [FILTER_KB],
            "filter": {
                "or": [
                    {"field": "category", "op": "eq", "value": value},
                    {"field": "category", "op": "contains", "value": value[:100]},
                    {"field": "content", "op": "contains", "value": value[:100]},
                ]
            },
        },
        headers=auth("anon"),
    )
    assert filtered.status_code == 200
    assert filtered.json()["chunk_count"] == 0  # matched as text, so nothing has it


@pytest.mark.anyio
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=JSON)
async def test_any_json_body_gets_a_documented_answer(client: httpx.AsyncClient, body: Any) -> None:
    for route in (
        "/retrieval",
        "/v1/search",
        "/v1/tools/unified-search",
        "/v1/merge",
        "/v1/citations/resolve",
    ):
        resp = await client.post(
            route,
            content=json.dumps(body),
            headers={**auth("anon"), "Content-Type": "application/json"},
        )
        assert resp.status_code < 500, (route, body, resp.text)
        if resp.status_code >= 400:
            err = resp.json()
            assert isinstance(err["error_code"], int) and isinstance(err["error_msg"], str)


BODY_ROUTES = ["/v1/merge", "/v1/explain", "/v1/citations/resolve", "/v1/search", "/retrieval"]


@pytest.mark.anyio
@pytest.mark.parametrize("route", BODY_ROUTES)
async def test_the_key_is_checked_before_the_body(client: httpx.AsyncClient, route: str) -> None:
    bad = {"Content-Type": "application/json"}
    resp = await client.post(route, content=b"{not json", headers=bad)
    assert resp.status_code == 403 and resp.json()["error_code"] == 1001, resp.text
    keyed = await client.post(route, content=b"{not json", headers={**bad, **auth("anon")})
    assert keyed.status_code == 400 and keyed.json()["path"] == "body", keyed.text


@pytest.mark.anyio
@pytest.mark.parametrize("route", BODY_ROUTES)
async def test_deep_nesting_has_the_one_error_shape(corpus: str, route: str) -> None:
    deep = b'{"rag_chunks": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    async with app_client(make_settings(corpus)) as c:
        resp = await c.post(
            route, content=deep, headers={**auth("anon"), "Content-Type": "application/json"}
        )
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["error_code"] == 3001 and body["path"].startswith("body"), body


def claims(*conditions: tuple[str, Any]) -> dict[str, Any]:
    return {
        "knowledge_id": SAMPLES_KB,
        "query": "巡更",
        "retrieval_setting": {"top_k": 3},
        "metadata_condition": {
            "conditions": [
                {"name": n, "comparison_operator": "is", "value": v} for n, v in conditions
            ]
        },
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    "conditions",
    [
        pytest.param((("user_id", "wang"), ("user_id", "li")), id="two-users"),
        pytest.param((("user_id", "wang"), ("user_id", "wang")), id="the-same-user-twice"),
        pytest.param((("user_id", "wang"), ("principal_token", "a.b.c")), id="user-and-token"),
        pytest.param((("principal_token", "a.b.c"), ("principal_token", "d.e.f")), id="two-tokens"),
        pytest.param((("user_roles", "a"), ("access_roles", "b")), id="two-role-claims"),
    ],
)
async def test_one_request_states_one_identity(
    client: httpx.AsyncClient, conditions: tuple[tuple[str, str], ...]
) -> None:
    resp = await client.post("/retrieval", json=claims(*conditions), headers=auth("anon"))
    assert resp.status_code == 400, resp.text
    assert resp.json()["path"] == "metadata_condition.conditions[1]"


@pytest.mark.anyio
async def test_a_null_identity_condition_is_no_claim(client: httpx.AsyncClient) -> None:
    body = claims(("user_id", None), ("user_id", "wang"))  # type: ignore[arg-type]
    assert (await client.post("/retrieval", json=body, headers=auth("anon"))).status_code == 200


@pytest.mark.anyio
async def test_a_413_names_the_body(client: httpx.AsyncClient) -> None:
    big = {"knowledge_id": SAMPLES_KB, "query": "巡" * 3000, "retrieval_setting": {"top_k": 1}}
    resp = await client.post("/retrieval", json=big, headers=auth("anon"))
    assert resp.status_code == 413 and resp.json() == {
        "error_code": 3001,
        "error_msg": "request body larger than 4096 bytes",
        "path": "body",
    }


@pytest.mark.anyio
async def test_a_long_query_is_cut_alike_on_every_route(corpus: str) -> None:
    # One rule (RSVC_MAX_QUERY_CHARS): searched as its first characters, never refused.
    long = "巡更" + "。" * 5000
    async with app_client(make_settings(corpus, max_query_chars=16)) as c:
        native = await c.post(
            "/v1/search", json={"query": long, "knowledge_ids": [SAMPLES_KB]}, headers=auth("anon")
        )
        dify = await c.post(
            "/retrieval",
            json={"knowledge_id": SAMPLES_KB, "query": long, "retrieval_setting": {"top_k": 5}},
            headers=auth("anon"),
        )
        short = await c.post(
            "/v1/search",
            json={"query": long[:16], "knowledge_ids": [SAMPLES_KB]},
            headers=auth("anon"),
        )
    assert native.status_code == dify.status_code == 200, (native.text, dify.text)
    assert native.json()["chunk_metadata"] == short.json()["chunk_metadata"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "value"),
    [("user_id", "{{#sys.user_id#}}"), ("user_roles", "{{#1711605541421.roles#}}"),
     ("principal_token", ["{{#conversation.token#}}"])],
)  # fmt: skip
async def test_an_unresolved_dify_variable_is_no_identity(
    client: httpx.AsyncClient, name: str, value: Any
) -> None:
    # Some Dify versions send a variable of an external knowledge base's filter as its template
    # text (langgenius/dify #18365, #38508): never a user id, a role or a token.
    resp = await client.post("/retrieval", json=claims((name, value)), headers=auth("anon"))
    assert resp.status_code == 400, resp.text
    assert resp.json()["path"] == "metadata_condition.conditions[0].value"
    assert "unresolved" in resp.json()["error_msg"]
