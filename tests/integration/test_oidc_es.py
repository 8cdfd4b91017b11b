"""The ``oidc`` identity mode against a local OpenID Connect provider (design.md §6).

The provider is a real HTTP server on loopback publishing a discovery document and a JWKS of
keys this test generates; tokens are signed with those keys when a test runs. Retrieval goes
through the app and the real Elasticsearch corpus.
"""

from __future__ import annotations

import base64
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.auth.oidc import claim_at
from tests.support import app_client, make_settings, postcheck_drops, reference
from tests.support.corpus import ACL_DOCS, ACL_KB
from tests.support.fake_provider import ServerThread

pytestmark = pytest.mark.anyio

AUDIENCE = "dify-chatflow"
REALM = "/realms/acme"
KEY = "oidc-key-0123456789abcdef"
POLICY = """\
p, anyone, acme, *, read
g, user:wang, 物业经理, acme
g, 物业经理, 运维工程师, acme
"""
INHERITS = {"物业经理": {"运维工程师"}}
CASBIN_ROLES = {"wang": {"物业经理"}}


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any
    declare_alg: bool = True

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        algo = jwt.algorithms.RSAAlgorithm if self.alg[0] in "RP" else jwt.algorithms.ECAlgorithm
        out: dict[str, Any] = algo.to_jwk(public, as_dict=True)
        out |= {"kid": self.kid, "use": "sig"}
        if self.declare_alg:
            out["alg"] = self.alg
        return out


def rsa_key(kid: str, alg: str = "RS256", **kw: Any) -> SigningKey:
    return SigningKey(
        kid, alg, rsa.generate_private_key(public_exponent=65537, key_size=2048), **kw
    )


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class Provider:
    """What the local provider publishes, and what it was asked."""

    keys: list[SigningKey]
    url: str = ""
    down: bool = False
    jwks_hits: int = 0
    extra_jwks: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def discovery(_: Request) -> Response:
            if self.down:
                return Response("unavailable", status_code=503)
            return JSONResponse(
                {
                    "issuer": self.url,
                    "jwks_uri": f"{self.url}/protocol/openid-connect/certs",
                    "id_token_signing_alg_values_supported": ["RS256", "ES256", "PS256"],
                }
            )

        async def jwks(_: Request) -> Response:
            self.jwks_hits += 1
            if self.down:
                return Response("unavailable", status_code=503)
            return JSONResponse({"keys": [k.jwk() for k in self.keys] + self.extra_jwks})

        return Starlette(  # under a realm path, as Keycloak serves them
            routes=[
                Route(f"{REALM}/.well-known/openid-configuration", discovery),
                Route(f"{REALM}/protocol/openid-connect/certs", jwks),
            ]
        )

    def token(
        self, key: SigningKey | None = None, *, header: dict[str, Any] | None = None, **claims: Any
    ) -> str:
        key = key or self.keys[0]
        now = int(time.time())  # minted when the test runs, never at collection
        payload = {"iss": self.url, "aud": AUDIENCE, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(
            payload, key.private, algorithm=key.alg, headers={"kid": key.kid, **(header or {})}
        )


@pytest.fixture(scope="module")
def signing_keys() -> list[SigningKey]:
    return [rsa_key("rsa-1"), ec_key("ec-1"), rsa_key("ps-1", "PS256")]


@pytest.fixture
def provider(signing_keys: list[SigningKey]) -> Iterator[Provider]:
    state = Provider(keys=list(signing_keys))
    with ServerThread(state.app()) as server:
        state.url = f"http://127.0.0.1:{server.port}{REALM}"
        yield state


def oidc_settings(corpus: str, policy: Path, provider: Provider, **overrides: Any) -> Any:
    key = ApiKeyConfig(name="sso", sha256=hash_key(KEY), tenant="acme", mode=IdentityMode.OIDC)
    values: dict[str, Any] = {
        "api_keys": [key],
        "casbin_policy": policy,
        "oidc_issuer": provider.url,
        "oidc_audience": [AUDIENCE],
        "oidc_roles_claim": "realm_access.roles",
        "oidc_jwks_min_refresh_s": 3600,  # an unknown kid may not make it fetch again
    }
    return make_settings(corpus, **(values | overrides))


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.csv"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
async def client(corpus: str, policy: Path, provider: Provider) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(oidc_settings(corpus, policy, provider)) as c:
        yield c
        assert postcheck_drops(c) == 0


def ask(token: str | None, *, kb: str = ACL_KB) -> dict[str, Any]:
    body: dict[str, Any] = {
        "knowledge_id": kb,
        "query": "消防演练",
        "retrieval_setting": {"top_k": 20, "score_threshold": 0},
    }
    if token is not None:
        body["metadata_condition"] = {
            "conditions": [{"name": "principal_token", "comparison_operator": "is", "value": token}]
        }
    return body


async def post(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await client.post("/retrieval", json=body, headers={"Authorization": f"Bearer {KEY}"})


async def chunk_ids(client: httpx.AsyncClient, token: str | None) -> set[str]:
    resp = await post(client, ask(token))
    assert resp.status_code == 200, resp.text
    return {r["metadata"]["chunk_id"] for r in resp.json()["records"]}


PUBLIC = {"acl-absent", "acl-null", "acl-empty"}
GROUPS = ["物业经理", "运维工程师", "保洁主管", "财务专员"]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    user=st.sampled_from(["wang", "li", "nobody"]),
    groups=st.sets(st.sampled_from(GROUPS), max_size=3),
    key_index=st.integers(0, 2),
)
async def test_a_token_retrieves_what_casbin_and_its_roles_allow(
    client: httpx.AsyncClient, provider: Provider, user: str, groups: set[str], key_index: int
) -> None:
    token = provider.token(
        provider.keys[key_index], sub=user, realm_access={"roles": sorted(groups)}
    )
    effective = reference.closure(groups | CASBIN_ROLES.get(user, set()), INHERITS)
    expected = {
        doc
        for doc, acl in ACL_DOCS.items()
        if reference.visible(acl.get("access_roles"), effective)
    }
    assert await chunk_ids(client, token) == expected


async def test_keys_are_fetched_once_and_kept(
    client: httpx.AsyncClient, provider: Provider
) -> None:
    for user in ("wang", "li", "wang"):
        assert await chunk_ids(client, provider.token(sub=user))
    assert provider.jwks_hits == 1
    assert await chunk_ids(client, None) == PUBLIC  # no token: anonymous, public only


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        pytest.param({"aud": "another-app"}, "Audience", id="wrong-audience"),
        pytest.param({"iss": "https://evil.example.com/realms/acme"}, "issuer", id="wrong-issuer"),
        pytest.param({"exp": 946684800}, "expired", id="expired"),  # 2000-01-01
        pytest.param({"sub": ""}, "'sub' claim", id="no-user"),
        pytest.param({"realm_access": {"roles": ["运维工程师", 3]}}, "not a list", id="bad-roles"),
    ],
)
async def test_invalid_tokens_are_401(
    client: httpx.AsyncClient,
    provider: Provider,
    claims: dict[str, Any],
    says: str,
) -> None:
    resp = await post(client, ask(provider.token(**({"sub": "wang"} | claims))))
    assert resp.status_code == 401, resp.text
    assert resp.json()["error_code"] == 1002 and says in resp.json()["error_msg"]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def test_algorithm_confusion_is_refused(
    client: httpx.AsyncClient, provider: Provider
) -> None:
    rsa_public_pem = (
        provider.keys[0]
        .private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    payload = {"iss": provider.url, "aud": AUDIENCE, "sub": "wang", "exp": int(time.time()) + 300}
    # HS256 "signed" with the provider's public key, the classic confusion attack.
    signing_input = ".".join(
        b64(json.dumps(part).encode())
        for part in ({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, payload)
    )
    forged = (
        signing_input + "." + b64(hmac.new(rsa_public_pem, signing_input.encode(), sha256).digest())
    )
    unsigned = ".".join(
        [
            b64(json.dumps({"alg": "none", "kid": "rsa-1"}).encode()),
            b64(json.dumps(payload).encode()),
            "",
        ]
    )
    # An RSA-signed token claiming the EC key's kid, and one claiming ES256 with the RSA key.
    wrong_key = provider.token(provider.keys[0], header={"kid": "ec-1"}, sub="wang")
    for token, says in [
        (forged, "'HS256' is not accepted"),
        (unsigned, "'none' is not accepted"),
        (wrong_key, "does not fit its signing key"),
    ]:
        resp = await post(client, ask(token))
        assert resp.status_code == 401, (says, resp.text)
        assert says in resp.json()["error_msg"]


async def test_a_flood_of_unknown_kids_fetches_nothing_more(
    client: httpx.AsyncClient, provider: Provider
) -> None:
    assert await chunk_ids(client, provider.token(sub="wang"))
    stranger = rsa_key("made-up")
    for _ in range(30):
        token = provider.token(stranger, header={"kid": f"kid-{uuid.uuid4().hex}"}, sub="wang")
        resp = await post(client, ask(token))
        assert resp.status_code == 401 and "not one the provider publishes" in resp.text
    assert provider.jwks_hits == 1  # jwks_min_refresh_s: no refetch for each made-up kid


async def test_rotation_picks_up_a_new_key(corpus: str, policy: Path, provider: Provider) -> None:
    # With no minimum interval, an unknown kid makes the service look at the JWKS again.
    async with app_client(
        oidc_settings(corpus, policy, provider, oidc_jwks_min_refresh_s=0)
    ) as client:
        assert await chunk_ids(client, provider.token(sub="wang"))
        rotated = rsa_key("rsa-2")
        provider.keys = [rotated]  # the old key is retired, the new one published
        assert await chunk_ids(client, provider.token(rotated, sub="wang")) == set(ACL_DOCS)
        assert provider.jwks_hits == 2


async def test_an_outage_keeps_cached_keys_working(
    corpus: str, policy: Path, provider: Provider
) -> None:
    # Keys older than jwks_max_age_s (0 here: always) are refreshed, but a failed refresh
    # keeps them: the provider being down does not log everybody out.
    async with app_client(
        oidc_settings(corpus, policy, provider, oidc_jwks_max_age_s=0, oidc_jwks_min_refresh_s=0)
    ) as client:
        assert await chunk_ids(client, provider.token(sub="wang")) == set(ACL_DOCS)
        provider.down = True
        assert await chunk_ids(client, provider.token(sub="wang")) == set(ACL_DOCS)
        assert provider.jwks_hits == 2  # it did try


async def test_no_keys_ever_is_503_not_401(corpus: str, policy: Path, provider: Provider) -> None:
    provider.down = True
    async with app_client(oidc_settings(corpus, policy, provider)) as client:
        resp = await post(client, ask(provider.token(sub="wang")))
        anonymous = await post(client, ask(None))
    assert resp.status_code == 503, resp.text
    assert resp.json()["error_code"] == 5003 and "identity provider" in resp.json()["error_msg"]
    assert anonymous.status_code == 200  # a request without a token needs no keys


async def test_plain_claims_are_refused_for_an_oidc_key(client: httpx.AsyncClient) -> None:
    body = ask(None)
    body["metadata_condition"] = {
        "conditions": [{"name": "user_id", "comparison_operator": "is", "value": "wang"}]
    }
    resp = await post(client, body)
    assert resp.status_code == 403 and "send a principal_token instead" in resp.text


async def test_roles_from_a_configured_claim_and_user_from_another(
    corpus: str, policy: Path, provider: Provider
) -> None:
    async with app_client(
        oidc_settings(
            corpus,
            policy,
            provider,
            oidc_roles_claim="groups",
            oidc_user_claim="preferred_username",
        )
    ) as client:
        by_group = provider.token(sub="x-1", preferred_username="li", groups=["运维工程师"])
        by_casbin = provider.token(sub="x-2", preferred_username="wang")
        assert await chunk_ids(client, by_group) == PUBLIC | {"acl-ops-mgr"}
        assert await chunk_ids(client, by_casbin) == set(ACL_DOCS)


async def test_an_email_user_id_counts_only_when_the_provider_verified_it(
    corpus: str, policy: Path, provider: Provider
) -> None:
    async with app_client(
        oidc_settings(corpus, policy, provider, oidc_user_claim="email")
    ) as client:
        # wang's grants are Casbin's: an unverified claim of his address must not reach them.
        for verified in (None, False, "false"):
            claims = {} if verified is None else {"email_verified": verified}
            unverified = provider.token(sub="x-9", email="wang", **claims)
            resp = await post(client, ask(unverified))
            assert resp.status_code == 401, (verified, resp.text)
            assert resp.json()["error_code"] == 1002
        verified_token = provider.token(sub="x-1", email="wang", email_verified=True)
        assert await chunk_ids(client, verified_token) == set(ACL_DOCS)


async def test_the_tool_takes_the_token_as_a_parameter(
    client: httpx.AsyncClient, provider: Provider
) -> None:
    resp = await client.post(
        "/v1/tools/unified-search",
        json={
            "query": "消防演练",
            "knowledge_ids": ACL_KB,
            "top_k": 20,
            "principal_token": provider.token(sub="li", realm_access={"roles": ["运维工程师"]}),
        },
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert resp.status_code == 200, resp.text
    ids = {c["chunk_id"] for c in resp.json()["chunk_metadata"] if c["source_type"] == "rag"}
    assert ids == PUBLIC | {"acl-ops-mgr"}


def test_claim_paths() -> None:
    payload = {"realm_access": {"roles": ["a"]}, "https://example.com/roles": ["b"], "sub": "u"}
    assert claim_at(payload, "realm_access.roles") == ["a"]
    assert claim_at(payload, "https://example.com/roles") == ["b"]
    assert claim_at(payload, "resource_access.app.roles") is None
    assert claim_at(payload, "sub.x") is None
