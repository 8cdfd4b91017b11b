"""Nothing time-bound is made at collection (issue #18): tokens are minted when used, and the
collection guard in conftest refuses a parameter that carries a token minted earlier."""

from __future__ import annotations

import time

import jwt
import pytest

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.auth.identity import Claims, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from tests.support import EXPIRED_AT, Token, minted, time_bound_tokens

SECRET = "a-secret-for-the-time-bound-tests-" + "y" * 30
KEY = ApiKeyConfig(
    name="signed",
    sha256=hash_key("time-bound-key-0123456789"),
    tenant="acme",
    mode=IdentityMode.SIGNED,
    token_secret=SECRET,
)


def test_a_token_declared_long_before_its_use_still_verifies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Declare the token while the clock reads two hours ago: what a slow collection, long
    # before the test runs, looks like to the token. It must be minted on use, not then.
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() - 7200)
    declared = Token(SECRET, {"sub": "alice", "tenant": "acme"}, lifetime_s=60)
    monkeypatch.setattr(time, "time", real_time)

    principal = resolve_principal(KEY, Claims(token=declared.mint()), AccessControl())
    assert principal.user_id == "alice"


def test_an_explicitly_expired_token_is_expired_on_any_clock() -> None:
    token = Token(SECRET, {"sub": "alice", "tenant": "acme", "exp": EXPIRED_AT}).mint()
    with pytest.raises(jwt.ExpiredSignatureError):
        jwt.decode(token, SECRET, algorithms=["HS256"])


def test_minted_reaches_tokens_at_any_depth() -> None:
    token = Token(SECRET, {"sub": "bob", "tenant": "acme"})
    body = minted({"conditions": [{"value": token}, {"value": "plain"}], "t": (token,)})
    assert isinstance(body["conditions"][0]["value"], str)
    assert jwt.decode(body["t"][0], SECRET, algorithms=["HS256"])["sub"] == "bob"
    assert body["conditions"][1]["value"] == "plain"


def test_the_collection_guard_finds_tokens_minted_ahead() -> None:
    live = jwt.encode({"sub": "x", "exp": time.time() + 60}, SECRET, algorithm="HS256")
    expired = jwt.encode({"sub": "x", "exp": EXPIRED_AT}, SECRET, algorithm="HS256")
    assert time_bound_tokens(live) == [live]
    assert time_bound_tokens(Claims(token=live)) == [live]
    assert time_bound_tokens([{"conditions": [{"value": live}]}]) == [live]
    # Tokens declared to mint on use, explicitly expired ones and plain text are fine.
    assert time_bound_tokens(Token(SECRET, {"sub": "x"})) == []
    assert time_bound_tokens(expired) == []
    assert time_bound_tokens("not.a.jwt") == []
    assert time_bound_tokens(Claims(user_id="alice")) == []
