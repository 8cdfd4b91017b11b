"""The service's answers in the reader's language (issue #58 §3): every message the service
raises for the common refusals has a row (its code and number unchanged), ``Accept-Language``
is read as browsers send it, and a message without a row keeps its English detail."""

from __future__ import annotations

import re
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval_svc.errors import invalid_body
from retrieval_svc.languages import ERRORS, error_body, error_message, explained, language

# The messages as the service raises them (their f-strings filled in), with their row.
RAISED = [
    ("missing Authorization header; send 'Bearer <api key>'", "missing_authorization"),
    ("Authorization header must be 'Bearer <api key>'", "malformed_authorization"),
    ("the API key is not valid", "invalid_key"),
    ("API key 'ops' is not an admin key", "not_admin"),
    ("API key 'idp' is a SCIM client's: it serves /scim/v2 only", "scim_key"),
    ("API key 'dify' may not read knowledge base 'hr'", "key_scope"),
    ("no policy lets this principal read knowledge base 'hr' in tenant 'acme'", "no_policy"),
    (
        "user id 'x@example.com' names no one in the directory of tenant 'acme', and API key "
        "'dify' refuses unknown users (unknown_user: refuse): sync the person, or map the id "
        "(retrieval-svc identity map import)",
        "unknown_user",
    ),
    (
        "user id 'wang' is an alias two people share in the directory of tenant 'acme', and "
        "API key 'dify' refuses unknown users (unknown_user: refuse): sync the person, or map "
        "the id (retrieval-svc identity map import)",
        "ambiguous_user",
    ),
    (
        "API key 'dify' refuses requests that state no identity (anonymous: refuse): bind the "
        "user_id condition to {{#sys.user_id#}} (docs/dify.md)",
        "no_identity",
    ),
    (
        "metadata_condition.conditions[0].value: 'user_id' is an unresolved Dify variable "
        "('{{sys.user_id}}'), not an identity: bind it to a variable that exists, as Dify's "
        "editor inserts it, {{#sys.user_id#}} (docs/dify.md)",
        "template_identity",
    ),
    (
        "metadata_condition.conditions[0].value: user id 'alice' is not in a shape API key "
        "'dify' expects (email, regex:(a|b)): bind it to {{#sys.user_id#}}, which the app's "
        "backend sets as the service API's user, and send ids of that shape (docs/dify.md)",
        "id_shape",
    ),
    (
        "metadata_condition.conditions[0].comparison_operator: 'user_id' names the end user's "
        "identity; only contains, in, is state it (operator 'is not' could widen access: "
        "refused)",
        "identity_operator",
    ),
    (
        "metadata_condition.conditions[1]: repeats the identity claim of "
        "metadata_condition.conditions[0]; send each identity claim once",
        "identity_repeated",
    ),
    (
        "metadata_condition.conditions[1]: conflicts with the identity claim of "
        "metadata_condition.conditions[0]; send each identity claim once",
        "identity_conflict",
    ),
    ("the principal token has expired", "token_expired"),
    ("the identity token has expired", "token_expired"),
    ("the principal token was minted for another tenant", "token_tenant"),
    ("the principal token is invalid: Signature verification failed", "token_invalid"),
    (
        "the identity token's email is not verified (email_verified is not true): an "
        "unverified address names no one",
        "email_unverified",
    ),
    ("the identity token has no 'email' claim naming the user", "no_user_claim"),
    ("the identity token's 'groups' claim is not a list of roles: a list of text", "roles_claim"),
    ("knowledge base 'nope' does not exist", "kb_missing"),
    ("the request did not finish within its deadline", "deadline"),
    ("filter.and[0].field: unknown field 'colour'; known fields: category, year", "unknown_field"),
    ("body: not valid JSON (Expecting value at character 0)", "not_json"),
    ("request body is required", "no_body"),
    ("request body larger than 1048576 bytes", "body_too_large"),
    ("send exactly one of chunk_id and document_id", "one_of_ids"),
]


@pytest.mark.parametrize(("message", "code"), RAISED)
def test_each_refusal_reads_in_chinese(message: str, code: str) -> None:
    rows = [row.code for row in ERRORS if row.english.search(message)]
    assert rows and rows[0] == code, rows
    said = error_message(message, 1002, "zh")
    assert said != message and not said.isascii(), said
    for literal in ("{{#sys.user_id#}}", "{{sys.user_id}}"):  # (Dify's variable, as sent)
        said = said.replace(literal, "")
    assert "{" not in said  # (every value filled in)
    assert error_message(message, 1002, "en") == message


def test_every_row_is_raised_somewhere() -> None:
    codes = {row.code for row in ERRORS if not row.code.startswith("validation_")}
    assert codes == {code for _, code in RAISED} | {"embedding_down"}


def test_a_message_without_a_row_keeps_its_detail_behind_its_code_s_words() -> None:
    said = error_message("top_k: Value error, something new", 3001, "zh")
    assert said == "请求无效：top_k: Value error, something new"


class _Shapes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    needed: str
    top_k: int = Field(1, ge=1, le=100)
    score: float = Field(0.5, gt=0, lt=1)
    op: Literal["eq", "ne", "in"] = "eq"
    ids: list[str] = Field(default_factory=list, min_length=1, max_length=2)
    name: str = Field("x", min_length=1, max_length=3)
    flag: bool = False
    child: dict[str, int] = Field(default_factory=dict)


BAD_BODIES = [
    {},
    {"needed": 3},
    {"needed": "x", "top_k": "many"},
    {"needed": "x", "top_k": 1.5},
    {"needed": "x", "top_k": 0},
    {"needed": "x", "top_k": 101},
    {"needed": "x", "score": 0},
    {"needed": "x", "score": 1},
    {"needed": "x", "score": "high"},
    {"needed": "x", "op": "like"},
    {"needed": "x", "ids": []},
    {"needed": "x", "ids": ["a", "b", "c"]},
    {"needed": "x", "ids": "a"},
    {"needed": "x", "name": ""},
    {"needed": "x", "name": "long"},
    {"needed": "x", "flag": "perhaps"},
    {"needed": "x", "child": []},
    {"needed": "x", "colour": "red"},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=[str(b) for b in BAD_BODIES])
def test_a_validation_error_reads_in_both_languages_from_its_type(body: dict[str, Any]) -> None:
    """Each of pydantic's common error types: the English as pydantic says it, the Chinese
    from the same row — nothing of pydantic's English left in it."""
    with pytest.raises(ValidationError) as raised:
        _Shapes.model_validate(body)
    first = raised.value.errors()[0]
    err = invalid_body(raised.value.errors())
    assert err.message.endswith(first["msg"]), (err.message, first)
    chinese = error_message(err.message, 3001, "zh")
    assert not chinese.startswith("请求无效："), chinese  # (a row said it, not the fallback)
    assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", chinese), chinese  # no English phrase
    assert chinese.startswith(err.path or ""), chinese


def test_the_code_and_the_path_never_change() -> None:
    body = {"error_code": 1002, "error_msg": "the API key is not valid", "path": "x"}
    assert error_body(body, "zh") == {"error_code": 1002, "error_msg": "API 密钥无效", "path": "x"}
    assert error_body(body, "en") == body


@pytest.mark.parametrize(
    ("header", "lang"),
    [
        (None, "en"),
        ("", "en"),
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("en;q=0.5, zh-TW;q=0.8", "zh"),
        ("fr-FR, zh;q=0.1", "zh"),
        ("fr-FR", "en"),
        ("zh;q=0, en", "en"),
        ("zh;q=abc", "zh"),  # (a weight it cannot read counts as 1)
    ],
)
def test_accept_language_as_browsers_send_it(header: str | None, lang: str) -> None:
    assert language(header) == lang


def test_explain_s_reasons_in_chinese_its_codes_unchanged() -> None:
    answer = {
        "chunks": [
            {
                "acl": {"code": "intersection", "rule": "…", "matched_roles": ["财务"],
                        "set_by": "rule 1 (财务/**) of acl-rules.yaml"},
                "knowledge_base": {"code": "granted", "reason": "…", "granted_by": "role:财务"},
            }
        ]
    }  # fmt: skip
    out = explained(answer, "zh")["chunks"][0]
    assert out["acl"]["rule"] == "可见：用户持有段落所列角色 财务"
    assert out["acl"]["code"] == "intersection"
    assert out["knowledge_base"]["reason"] == "策略授权给 role:财务"
    assert not out["acl"]["set_by"].startswith("rule 1")


def test_a_deny_no_sync_read_is_explained_in_chinese_naming_the_sid() -> None:
    acl = {"code": "narrowed", "rule": "…", "unknown_sids": ["S-1-5-32-545"]}
    answer = {"chunks": [{"acl": acl, "knowledge_base": {}}]}
    out = explained(answer, "zh")["chunks"][0]["acl"]
    assert out["code"] == "narrowed" and "S-1-5-32-545" in out["rule"]
    assert out["rule"].startswith("收窄：其 DACL 的拒绝项")
