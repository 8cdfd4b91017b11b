"""Identity modes by ways of sending claims (design.md §6): who the principal turns out to be."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL
from retrieval_svc.auth.identity import Claims, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.errors import AuthorizationFailed, InvalidPrincipalToken
from tests.support import EXPIRED_AT, Token, minted

SECRET = "token-secret-for-tests-" + "0123456789abcdef" * 3  # 64 bytes: fine for HS512 too
POLICY = """\
p, anyone, *, *, read
g, user:alice, 物业经理, acme
g, 物业经理, 运维工程师, acme
"""


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> AccessControl:
    path: Path = tmp_path_factory.mktemp("policy") / "policy.csv"
    path.write_text(POLICY, encoding="utf-8")
    return AccessControl(DEFAULT_MODEL, path)


def key(mode: IdentityMode, **kw: Any) -> ApiKeyConfig:
    return ApiKeyConfig(
        name=f"k-{mode.value}",
        sha256=hash_key(f"key-{mode.value}-123"),
        tenant="acme",
        mode=mode,
        token_secret=SECRET,
        **kw,
    )


def token(secret: str = SECRET, alg: str = "HS256", **claims: Any) -> Token:
    """alice's token (claims override; None leaves one out), minted when the test uses it."""
    payload = {"sub": "alice", "roles": ["访客"], "tenant": "acme", **claims}
    return Token(secret, payload, algorithm=alg)


MGR = {"物业经理", "运维工程师"}  # alice's roles from Casbin, hierarchy expanded
# A person the tenant knows also holds Windows' Everyone and Authenticated Users.
KNOWN = MGR | {"sid:S-1-1-0", "sid:S-1-5-11"}

NONE = Claims()
USER = Claims(user_id="alice")
ROLES = Claims(roles=("物业经理",))
USER_ROLES = Claims(user_id="bob", roles=("访客",))
TOKEN = Claims(token=token())  # a Token, minted by the test that uses it


def with_minted_token(claims: Claims) -> Claims:
    """``claims`` with its token (declared as a ``Token``) minted now."""
    return Claims(user_id=claims.user_id, roles=claims.roles, token=minted(claims.token))


@pytest.mark.parametrize(
    ("mode", "claims", "user", "roles"),
    [
        pytest.param(IdentityMode.CASBIN, NONE, None, set(), id="casbin-nothing-anonymous"),
        pytest.param(IdentityMode.CASBIN, USER, "alice", KNOWN, id="casbin-user-roles-from-policy"),
        pytest.param(IdentityMode.TRUSTED, NONE, None, set(), id="trusted-nothing-anonymous"),
        pytest.param(IdentityMode.TRUSTED, USER, "alice", KNOWN, id="trusted-user"),
        pytest.param(IdentityMode.TRUSTED, ROLES, None, MGR, id="trusted-roles-expanded"),
        pytest.param(
            IdentityMode.TRUSTED, USER_ROLES, "bob", {"访客"}, id="trusted-user-and-roles"
        ),
        pytest.param(IdentityMode.SIGNED, NONE, None, set(), id="signed-nothing-anonymous"),
        pytest.param(IdentityMode.SIGNED, TOKEN, "alice", KNOWN | {"访客"}, id="signed-token"),
        pytest.param(IdentityMode.FIXED, NONE, None, {"巡检员"}, id="fixed-key-roles"),
        pytest.param(IdentityMode.FIXED, USER_ROLES, None, {"巡检员"}, id="fixed-ignores-claims"),
        pytest.param(IdentityMode.FIXED, TOKEN, None, {"巡检员"}, id="fixed-ignores-token"),
    ],
)
def test_principal(
    acl: AccessControl, mode: IdentityMode, claims: Claims, user: str | None, roles: set[str]
) -> None:
    k = key(mode, roles=("巡检员",) if mode is IdentityMode.FIXED else ())
    principal = resolve_principal(k, with_minted_token(claims), acl)
    assert principal.tenant == "acme"
    assert principal.user_id == user
    assert principal.roles == roles
    assert principal.anonymous is (user is None and not roles)


@pytest.mark.parametrize(
    ("mode", "claims"),
    [
        pytest.param(IdentityMode.CASBIN, ROLES, id="casbin-refuses-role-claims"),
        pytest.param(IdentityMode.CASBIN, TOKEN, id="casbin-refuses-token"),
        pytest.param(IdentityMode.TRUSTED, TOKEN, id="trusted-refuses-token"),
        pytest.param(IdentityMode.SIGNED, USER, id="signed-refuses-plain-user"),
        pytest.param(IdentityMode.SIGNED, ROLES, id="signed-refuses-plain-roles"),
    ],
)
def test_claims_a_mode_does_not_accept_are_refused(
    acl: AccessControl, mode: IdentityMode, claims: Claims
) -> None:
    with pytest.raises(AuthorizationFailed) as err:
        resolve_principal(key(mode), with_minted_token(claims), acl)
    assert err.value.status_code == 403


@pytest.mark.parametrize(
    ("bad_token", "message"),
    [
        pytest.param(token(exp=EXPIRED_AT), "expired", id="expired"),
        pytest.param(
            token(secret="another-secret-of-sufficient-length-for-hs256!!"),
            "invalid",
            id="wrong-secret",
        ),
        pytest.param(token(tenant="other"), "another tenant", id="other-tenant"),
        pytest.param(token(exp=None), "invalid", id="no-expiry"),
        pytest.param(token(tenant=None), "invalid", id="no-tenant"),
        pytest.param(token(roles='["a",'), "roles", id="unreadable-roles"),
        pytest.param(token(alg="HS512"), "invalid", id="other-algorithm"),
        pytest.param(token(alg="none", roles=None), "invalid", id="alg-none"),
        pytest.param(lambda: token().mint()[:-3] + "abc", "invalid", id="tampered-signature"),
        pytest.param("not.a.jwt", "invalid", id="garbage"),
    ],
)
def test_bad_tokens_are_401_never_anonymous(
    acl: AccessControl, bad_token: Token | Callable[[], str] | str, message: str
) -> None:
    if callable(bad_token) and not isinstance(bad_token, Token):
        bad_token = bad_token()
    claims = Claims(token=minted(bad_token))
    with pytest.raises(InvalidPrincipalToken, match=message) as err:
        resolve_principal(key(IdentityMode.SIGNED), claims, acl)
    assert err.value.status_code == 401


@pytest.mark.parametrize(
    ("mode", "missing"),
    [(IdentityMode.SIGNED, "token_secret"), (IdentityMode.FIXED, "roles")],
)
def test_keys_that_cannot_work_are_refused_naming_the_key(mode: IdentityMode, missing: str) -> None:
    # At request time they would fail every request, or act anonymous without a word.
    with pytest.raises(ValueError, match=f"'ops-key' has mode {mode.value} but no {missing}"):
        ApiKeyConfig(name="ops-key", sha256=hash_key("k-0123456789"), mode=mode)


def test_payload_tampering_breaks_the_signature(acl: AccessControl) -> None:
    header, _payload, signature = token().mint().split(".")
    forged_payload = jwt.utils.base64url_encode(
        b'{"sub":"alice","roles":["admin"],"tenant":"acme","exp":9999999999}'
    ).decode()
    with pytest.raises(InvalidPrincipalToken):
        resolve_principal(
            key(IdentityMode.SIGNED), Claims(token=f"{header}.{forged_payload}.{signature}"), acl
        )


def test_example_token_minter_is_accepted(acl: AccessControl) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "dify" / "mint_token.py"
    spec = importlib.util.spec_from_file_location("mint_token", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    minted = module.mint("alice", ["访客"], "acme", 60, SECRET)
    principal = resolve_principal(key(IdentityMode.SIGNED), Claims(token=minted), acl)
    assert principal.user_id == "alice" and principal.roles == KNOWN | {"访客"}


# Users and roles never share a name space (design.md §4): asserting the role ``user:alice``
# must not act as alice, and nobody asserts ``anyone``. Without the check, each of these would
# get alice's Casbin roles (物业经理 → 运维工程师).
# Nor a Windows SID: asserting ``sid:S-1-1-0`` would read what Everyone may on a file share,
# a group's SID what its members may (only the directory sync gives SID roles).
RESERVED = [
    pytest.param("user:alice", id="a-user"),
    pytest.param("anyone", id="anyone"),
    pytest.param("sid:S-1-1-0", id="a-sid"),
    pytest.param("SID:S-1-5-21-1-2-3-513", id="a-sid-upper-case"),
    # Compatibility forms a reader takes for the same words (folded with NFKC).
    pytest.param("\uff53\uff49\uff44:S-1-1-0", id="a-sid-fullwidth"),
    pytest.param("\uff33\uff29\uff24\uff1aS-1-5-11", id="a-sid-fullwidth-colon"),
    pytest.param(" sid:S-1-1-0", id="a-sid-after-a-space"),
    pytest.param("\uff55\uff53\uff45\uff52:alice", id="a-user-fullwidth"),
]


@pytest.mark.parametrize("role", RESERVED)
def test_a_trusted_role_claim_naming_a_user_is_refused(acl: AccessControl, role: str) -> None:
    with pytest.raises(AuthorizationFailed, match="may not name a user") as err:
        resolve_principal(key(IdentityMode.TRUSTED), Claims(roles=(role, "访客")), acl)
    assert err.value.status_code == 403


@pytest.mark.parametrize("role", RESERVED)
def test_a_signed_token_asserting_a_user_is_invalid(acl: AccessControl, role: str) -> None:
    claims = Claims(token=token(sub=None, roles=[role]).mint())
    with pytest.raises(InvalidPrincipalToken, match="reserved role") as err:
        resolve_principal(key(IdentityMode.SIGNED), claims, acl)
    assert err.value.status_code == 401


@pytest.mark.parametrize("role", RESERVED)
def test_an_oidc_group_naming_a_user_is_invalid(acl: AccessControl, role: str) -> None:
    from retrieval_svc.auth.oidc import VerifiedUser

    user = VerifiedUser(user_id="mallory", roles=(role,))
    with pytest.raises(InvalidPrincipalToken, match="reserved role") as err:
        resolve_principal(
            key(IdentityMode.OIDC), Claims(token="verified-upstream"), acl, oidc_user=user
        )
    assert err.value.status_code == 401


@pytest.mark.parametrize("role", RESERVED)
def test_a_key_carrying_a_user_as_a_role_does_not_start(role: str) -> None:
    with pytest.raises(ValueError, match="'ops-key': role"):
        ApiKeyConfig(
            name="ops-key", sha256=hash_key("k-0123456789"), mode=IdentityMode.FIXED, roles=(role,)
        )


def test_a_role_that_merely_contains_user_is_a_role(acl: AccessControl) -> None:
    principal = resolve_principal(key(IdentityMode.TRUSTED), Claims(roles=("superuser:x",)), acl)
    assert principal.roles == {"superuser:x"}
