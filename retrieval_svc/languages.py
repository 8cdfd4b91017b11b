"""The service's answers in the reader's language (issue #58 §3): English by default, Chinese
when the request's ``Accept-Language`` prefers it.

Only words change: ``error_code`` and every field a program reads stay as they are. An
``error_msg`` is matched against the rows below (the English text's shape, its values as named
groups, the same sentence in Chinese); a message no row has keeps its English detail behind
the Chinese summary of its code, so a new message is never lost, only untranslated.
``tests/unit/test_languages.py`` holds the rows to the messages the service raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from retrieval_svc.reasons import Reason, match_row, roles_source_text, row
from retrieval_svc.validation_words import ROWS as VALIDATION

Language = str  # "en" | "zh"


def language(accept_language: str | None, default: Language = "en") -> Language:
    """``zh`` when the reader prefers Chinese (the first of ``zh*`` or ``en*`` in
    ``Accept-Language``, weights honoured), ``en`` when English; ``default`` (the server's
    ``RSVC_DEFAULT_LANGUAGE``) when the request names neither — Dify sends none."""
    ranked: list[tuple[float, int, str]] = []
    for n, part in enumerate((accept_language or "").split(",")):
        tag, _, params = part.strip().lower().partition(";")
        weight = 1.0
        if (found := re.search(r"q=([0-9.]+)", params)) is not None:
            try:
                weight = float(found.group(1))
            except ValueError:
                weight = 0.0
        if weight > 0 and tag.startswith(("zh", "en")):
            ranked.append((-weight, n, tag[:2]))
    return min(ranked)[2] if ranked else default


# The messages of the errors the service answers with (retrieval_svc.errors and where they
# are raised), most specific first.
ERRORS: tuple[Reason, ...] = (
    row("missing_authorization", r"^missing Authorization header; send 'Bearer <api key>'$", "缺少 Authorization 请求头：请发送 'Bearer <API 密钥>'"),
    row("malformed_authorization", r"^Authorization header must be 'Bearer <api key>'$", "Authorization 请求头必须是 'Bearer <API 密钥>'"),
    row("invalid_key", r"^the API key is not valid$", "API 密钥无效"),
    row("not_admin", r"^API key (?P<key>'.+?') is not an admin key$", "API 密钥 {key} 不是管理员密钥"),
    row("scim_key", r"^API key (?P<key>'.+?') is a SCIM client's: it serves /scim/v2 only$", "API 密钥 {key} 属于 SCIM 客户端：只能用于 /scim/v2"),
    row("key_scope", r"^API key (?P<key>'.+?') may not read knowledge base (?P<kb>'.+?')$", "API 密钥 {key} 无权读取知识库 {kb}"),
    row("no_policy", r"^no policy lets this principal read knowledge base (?P<kb>'.+?') in tenant (?P<tenant>'.+?')$", "没有策略允许此用户读取租户 {tenant} 的知识库 {kb}"),
    row("unknown_user", r"^user id (?P<id>'.*?'|None) names no one in the directory of tenant (?P<tenant>'.+?'), and API key (?P<key>'.+?') refuses unknown users", "用户 ID {id} 在租户 {tenant} 的目录中对不上任何人，而 API 密钥 {key} 拒绝未知用户（unknown_user: refuse）：请同步此人，或映射这个 ID（retrieval-svc identity map import）"),
    row("ambiguous_user", r"^user id (?P<id>'.*?'|None) is an alias two people share in the directory of tenant (?P<tenant>'.+?'), and API key (?P<key>'.+?') refuses unknown users", "用户 ID {id} 在租户 {tenant} 的目录中是两个人共用的别名，而 API 密钥 {key} 拒绝未知用户（unknown_user: refuse）：请修正目录，或映射这个 ID（retrieval-svc identity map import）"),
    row("no_identity", r"^API key (?P<key>'.+?') refuses requests that state no identity \(anonymous: refuse\)", "API 密钥 {key} 拒绝未声明身份的请求（anonymous: refuse）：请把 user_id 条件绑定到 {{{{#sys.user_id#}}}}（docs/dify.zh-CN.md）"),
    row("template_identity", r"^(?P<path>\S+): (?P<name>'.+?') is an unresolved Dify variable \((?P<value>.*)\), not an identity: ", "{path}：{name} 是未被解析的 Dify 变量（{value}），不是身份：请把它绑定到一个存在的变量，写法与 Dify 编辑器插入的一致：{{{{#sys.user_id#}}}}（docs/dify.zh-CN.md）"),
    row("id_shape", r"^(?P<path>\S+): user id (?P<id>.+) is not in a shape API key (?P<key>'.+?') expects \((?P<shapes>.*)\): bind it to ", "{path}：用户 ID {id} 不符合 API 密钥 {key} 要求的格式（{shapes}）：请把它绑定到 {{{{#sys.user_id#}}}}（由应用的后端作为服务 API 的 user 设置），并发送这种格式的 ID（docs/dify.zh-CN.md）"),
    row("identity_operator", r"^(?P<path>\S+): (?P<name>'.+?') names the end user's identity; only (?P<allowed>.+?) state it \(operator (?P<op>.+?) could widen access: refused\)$", "{path}：{name} 表示最终用户的身份，只有 {allowed} 能声明它（运算符 {op} 可能扩大访问范围：已拒绝）"),
    row("identity_repeated", r"^(?P<path>\S+): repeats the identity claim of (?P<earlier>\S+); send each identity claim once$", "{path}：重复了 {earlier} 的身份声明；每个身份声明只发送一次"),
    row("identity_conflict", r"^(?P<path>\S+): conflicts with the identity claim of (?P<earlier>\S+); send each identity claim once$", "{path}：与 {earlier} 的身份声明冲突；每个身份声明只发送一次"),
    row("token_expired", r"^the (?P<kind>principal|identity) token has expired$", "{kind}令牌已过期"),
    row("token_tenant", r"^the principal token was minted for another tenant$", "主体令牌是为另一个租户签发的"),
    row("token_invalid", r"^the (?P<kind>principal|identity) token is (?:invalid|malformed): (?P<why>.+)$", "{kind}令牌无效：{why}"),
    row("email_unverified", r"^the identity token's email is not verified \(email_verified is not true\): an unverified address names no one$", "身份令牌中的 email 未经验证（email_verified 不为 true）：未经验证的地址对不上任何人"),
    row("no_user_claim", r"^the identity token has no (?P<claim>'.+?') claim naming the user$", "身份令牌中没有指明用户的 {claim} 声明"),
    row("roles_claim", r"^the identity token's (?P<claim>'.+?') claim is not a list of roles: (?P<why>.+)$", "身份令牌的 {claim} 声明不是角色列表：{why}"),
    row("kb_missing", r"^knowledge base (?P<kb>.+) does not exist$", "知识库 {kb} 不存在"),
    row("deadline", r"^the request did not finish within its deadline$", "请求未能在期限内完成"),
    row("embedding_down", r"^the embedding model is unavailable: (?P<why>.+)$", "向量模型不可用：{why}"),
    row("unknown_field", r"^(?P<path>\S+): unknown field (?P<field>'.+?'); known fields: (?P<known>.*)$", "{path}：未知字段 {field}；已知字段：{known}"),
    row("not_json", r"^body: not valid JSON \((?P<detail>.*)\)$", "请求体不是有效的 JSON（{detail}）"),
    row("no_body", r"^request body is required$", "缺少请求体"),
    row("body_too_large", r"^request body larger than (?P<limit>\d+) bytes$", "请求体超过 {limit} 字节"),
    row("one_of_ids", r"^send exactly one of chunk_id and document_id$", "chunk_id 和 document_id 只能且必须发送一个"),
    *VALIDATION,  # (a body that failed validation: from pydantic's error type, not its English)
)  # fmt: skip
_KIND = {"principal": "主体", "identity": "身份"}

# What each error code says, for a message no row has (its English detail follows).
SUMMARY = {
    1001: "Authorization 请求头缺失或格式错误",
    1002: "无权访问",
    2001: "知识库不存在",
    3001: "请求无效",
    5000: "内部错误",
    5001: "检索服务暂不可用",
    5002: "请求超时",
    5003: "暂时无法校验身份令牌",
    404: "未找到",
    405: "不支持此请求方法",
    413: "请求体过大",
}


def error_message(english: str, code: int, lang: Language) -> str:
    """An error's message in ``lang``."""
    if lang != "zh":
        return english
    if (found := match_row(ERRORS, english)) is not None:
        reason, values = found
        if "kind" in values:
            values["kind"] = _KIND.get(values["kind"], values["kind"])
        return reason.chinese.format(**values)
    summary = SUMMARY.get(code, "请求失败")
    return f"{summary}：{english}"


def error_body(body: Mapping[str, Any], lang: Language) -> dict[str, Any]:
    """An error body (``{"error_code", "error_msg", …}``) with its message in ``lang``."""
    out = dict(body)
    if lang == "zh" and isinstance(out.get("error_msg"), str):
        code = out.get("error_code")
        out["error_msg"] = error_message(
            out["error_msg"], code if isinstance(code, int) else 0, lang
        )
    return out


# /v1/explain: the rule that decided a chunk, and why a knowledge base may or may not be read.
RULES = {
    "public": "公开：段落未限定角色（access_roles 缺失、为 null 或为空）",
    "intersection": "可见：用户持有段落所列角色 {roles}",
    "restricted": "受限：用户不持有段落所列任何角色",
    "denied": "拒绝：用户持有段落拒绝的角色 {refused}",
    "narrowed": "收窄：用户不持有收窄该段落的任何角色",
    # (a deny naming a SID no directory sync read: the code stays "narrowed")
    "narrowed_unknown": "收窄：其 DACL 的拒绝项指向 {unknown}，目录同步未读取该 SID：对所有人拒绝（失败即关闭）",
}
KB_REASONS = {
    "granted": "策略授权给 {granted_by}",
    "no_policy": "没有策略允许此用户读取该知识库",
    "key_scope": "不在此 API 密钥可用的知识库内",
}


def explained(answer: dict[str, Any], lang: Language) -> dict[str, Any]:
    """``/v1/explain``'s answer with its reasons in ``lang`` (codes and values unchanged)."""
    if lang != "zh":
        return answer
    for chunk in answer.get("chunks", ()):
        acl, kb = chunk.get("acl", {}), chunk.get("knowledge_base", {})
        if acl.get("code") in RULES:
            unknown = acl.get("code") == "narrowed" and acl.get("unknown_sids")
            acl["rule"] = RULES["narrowed_unknown" if unknown else acl["code"]].format(
                roles="、".join(acl.get("matched_roles", ())),
                refused="、".join(acl.get("denied_roles", ())),
                unknown="、".join(acl.get("unknown_sids", ())),
            )
        if isinstance(acl.get("set_by"), str):
            acl["set_by"] = roles_source_text(acl["set_by"], "zh")
        if kb.get("code") in KB_REASONS:
            kb["reason"] = KB_REASONS[kb["code"]].format(granted_by=kb.get("granted_by") or "")
    return answer
