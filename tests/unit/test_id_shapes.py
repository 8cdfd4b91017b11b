"""What an identity value may be: never a variable Dify left unresolved (in any spelling, or
a missing variable's selector), and, where the key says so, one of the shapes its callers send
(e-mail, UUID, directory uid, a pattern). Each shape of refusal reads as a 400 naming the
fix, never as a stranger served public documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL
from retrieval_svc.auth.identity import Claims, make_claims, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.dify.schemas import MetadataCondition
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest
from retrieval_svc.filters.dify import translate
from retrieval_svc.id_shapes import fits, template_problem

POLICY = """\
p, anyone, *, *, read
g, user:alice, 法务, acme
g, user:alice@example.com, 法务, acme
g, user:ab12cd34-0000-4000-8000-0123456789ab, 法务, acme
"""


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> AccessControl:
    path: Path = tmp_path_factory.mktemp("policy") / "policy.csv"
    path.write_text(POLICY, encoding="utf-8")
    return AccessControl(DEFAULT_MODEL, path)


def key(**kw: Any) -> ApiKeyConfig:
    return ApiKeyConfig(name="dify", sha256=hash_key("key-dify-123"), tenant="acme", **kw)


UNRESOLVED = [
    "{{sys.user_id}}",  # what every page of the docs said, sent literally by Dify 1.13.2
    "{{#sys.user_id#}}",
    "{{ sys.user_id }}",
    "{{#sys.user-id#}}",  # not a name Dify's pattern takes: left as written
    "{{#1711605541421.as_user#}}",
    "{% raw %}",
    "alice {{#x#}}",
    "start.nosuchvar",  # what {{#start.nosuchvar#}} arrives as: Dify's text for a missing one
    "sys.user_id",
    "conversation.token",
    "env.USER",
    "1711605541421.as_user",
    " sys.user_id ",
]
IDS = ["alice", "alice@example.com", "john.smith", "王伟", "S-1-5-21-1", "startx.y", "sysadmin"]


@pytest.mark.parametrize("value", UNRESOLVED)
def test_an_unresolved_variable_in_any_spelling_is_no_identity(value: str) -> None:
    assert template_problem(value) is not None


@pytest.mark.parametrize("value", IDS)
def test_an_id_is_an_id(value: str) -> None:
    assert template_problem(value) is None


@pytest.mark.parametrize("value", UNRESOLVED)
@pytest.mark.parametrize("name", ["user_id", "user_roles", "principal_token"])
def test_a_dify_condition_carrying_one_is_a_400_at_its_value(value: str, name: str) -> None:
    cond = MetadataCondition.model_validate(
        {"conditions": [{"name": name, "comparison_operator": "is", "value": value}]}
    )
    with pytest.raises(InvalidRequest) as caught:
        translate(cond)
    assert caught.value.path == "metadata_condition.conditions[0].value"
    assert caught.value.reason == "template_identity"
    assert "{{#sys.user_id#}}" in caught.value.message  # the fix, as Dify writes it


@pytest.mark.parametrize("value", UNRESOLVED)
def test_the_tool_and_the_native_api_refuse_one_too(value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        make_claims(value, None, None, path="body")
    assert caught.value.path == "body.user_id"
    with pytest.raises(InvalidRequest):
        make_claims("alice", [value], None, path="body")


@pytest.mark.parametrize(
    ("shapes", "value", "fit"),
    [
        pytest.param(("email",), "alice@example.com", True, id="email"),
        pytest.param(("email",), "alice", False, id="a-typed-name-is-no-email"),
        pytest.param(("email",), "a@b", False, id="no-dot-in-the-domain"),
        pytest.param(("email",), "a b@example.com", False, id="a-space"),
        pytest.param(("uuid",), "ab12cd34-0000-4000-8000-0123456789ab", True, id="uuid"),
        pytest.param(("uuid",), "ab12cd34", False, id="part-of-a-uuid"),
        pytest.param(("directory_uid",), "alice_w-2", True, id="uid"),
        pytest.param(("directory_uid",), "node.var", False, id="a-selector-is-no-uid"),
        pytest.param(("directory_uid",), "alice@example.com", False, id="an-email-is-no-uid"),
        pytest.param(("regex:[a-z]+\\.[a-z]+",), "john.smith", True, id="regex"),
        pytest.param(("regex:[a-z]+",), "john.smith", False, id="regex-matches-all-of-it"),
        pytest.param(("email", "uuid"), "ab12cd34-0000-4000-8000-0123456789ab", True, id="list"),
        pytest.param((), "anything at all", True, id="no-shape-any-id"),
    ],
)
def test_shapes(shapes: tuple[str, ...], value: str, fit: bool) -> None:
    assert fits(value, shapes) is fit


@pytest.mark.parametrize("shape", ["mail", "regex:([a-z]", "EMAIL", ""])
def test_a_key_naming_no_shape_does_not_start(shape: str) -> None:
    with pytest.raises(ValidationError, match="user_id_shape"):
        key(user_id_shape=shape)


def test_a_key_takes_one_shape_or_a_list() -> None:
    assert key(user_id_shape="email").user_id_shape == ("email",)
    assert key(user_id_shape=["email", "uuid"]).user_id_shape == ("email", "uuid")


@pytest.mark.parametrize("mode", [IdentityMode.CASBIN, IdentityMode.TRUSTED])
def test_an_id_in_no_shape_the_key_expects_is_a_400_where_it_was_sent(
    acl: AccessControl, mode: IdentityMode
) -> None:
    k = key(mode=mode, user_id_shape="email")
    where = "metadata_condition.conditions[0].value"
    with pytest.raises(InvalidRequest) as caught:
        resolve_principal(k, Claims(user_id="alice", user_id_path=where), acl)
    assert (caught.value.path, caught.value.reason) == (where, "id_shape")
    got = resolve_principal(k, Claims(user_id="alice@example.com"), acl)
    assert "法务" in got.roles


def test_a_key_refusing_anonymous_refuses_a_request_without_identity(acl: AccessControl) -> None:
    with pytest.raises(AuthorizationFailed) as caught:
        resolve_principal(key(anonymous="refuse"), Claims(), acl)
    assert caught.value.reason == "no_identity"
    assert resolve_principal(key(), Claims(), acl).anonymous  # the default: public only
    signed = key(anonymous="refuse", mode=IdentityMode.SIGNED, token_secret="s" * 40)
    with pytest.raises(AuthorizationFailed):
        resolve_principal(signed, Claims(), acl)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
TEMPLATEISH = st.sampled_from(
    ["{{", "}}", "{#", "#}", "sys.", "start.", ".x", "@", " ", "1711605541421"]
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["user_id", "user_roles", "principal_token"]),
    op=st.sampled_from(["is", "contains", "in", "=", "is not"]),
    value=JSON | st.lists(TEMPLATEISH, max_size=6).map("".join),
    shape=st.sampled_from([(), ("email",), ("uuid", "directory_uid"), ("regex:[a-z]+",)]),
    mode=st.sampled_from([IdentityMode.CASBIN, IdentityMode.TRUSTED]),
)
def test_any_identity_value_is_an_answer_or_a_refusal_never_a_crash(
    acl: AccessControl, name: str, op: str, value: Any, shape: tuple[str, ...], mode: IdentityMode
) -> None:
    cond = MetadataCondition.model_validate(
        {"conditions": [{"name": name, "comparison_operator": op, "value": value}]}
    )
    k = key(mode=mode, user_id_shape=shape, anonymous="refuse")
    try:
        _, claims = translate(cond)
        principal = resolve_principal(k, claims, acl)
    except (InvalidRequest, AuthorizationFailed):
        return
    # What got through names someone in a shape the key takes; never a template.
    assert principal.user_id is not None or principal.roles
    if claims.user_id is not None:
        assert template_problem(claims.user_id) is None and fits(claims.user_id, shape)
