"""A request that failed validation, said from pydantic's error ``type`` and ``ctx`` in
English and Chinese — never pydantic's own English ``msg``, which has no Chinese.

``english(error)`` is what ``retrieval_svc.errors.invalid_body`` puts after the field's path;
``ROWS`` are the rows ``retrieval_svc.languages`` says it again in Chinese with. A type no row
has keeps pydantic's message (the Chinese then names the error code's summary before it).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from retrieval_svc.reasons import Reason, row

# pydantic's error type → (English, Chinese), with the values of its ``ctx`` by name
# (``s``: the English plural of the number before it).
MESSAGES: dict[str, tuple[str, str]] = {
    "missing": ("Field required", "缺少必填字段"),
    "extra_forbidden": ("Extra inputs are not permitted", "不允许此字段"),
    "string_type": ("Input should be a valid string", "应为字符串"),
    "int_type": ("Input should be a valid integer", "应为整数"),
    "int_parsing": ("Input should be a valid integer, unable to parse string as an integer", "应为整数：无法把该字符串读作整数"),
    "int_from_float": ("Input should be a valid integer, got a number with a fractional part", "应为整数，收到的是带小数部分的数"),
    "float_type": ("Input should be a valid number", "应为数字"),
    "float_parsing": ("Input should be a valid number, unable to parse string as a number", "应为数字：无法把该字符串读作数字"),
    "finite_number": ("Input should be a finite number", "应为有限的数字"),
    "bool_type": ("Input should be a valid boolean", "应为布尔值"),
    "bool_parsing": ("Input should be a valid boolean, unable to interpret input", "应为布尔值：无法解读该输入"),
    "list_type": ("Input should be a valid list", "应为列表"),
    "tuple_type": ("Input should be a valid tuple", "应为列表"),
    "set_type": ("Input should be a valid set", "应为列表（集合）"),
    "dict_type": ("Input should be a valid dictionary", "应为对象"),
    "model_type": ("Input should be an object", "应为对象"),
    "model_attributes_type": ("Input should be a valid dictionary or object to extract fields from", "应为对象"),
    "none_required": ("Input should be None", "应为 null"),
    "literal_error": ("Input should be {expected}", "应为以下之一：{expected}"),
    "enum": ("Input should be {expected}", "应为以下之一：{expected}"),
    "string_too_short": ("String should have at least {min_length} character{s}", "字符串至少应有 {min_length} 个字符"),
    "string_too_long": ("String should have at most {max_length} character{s}", "字符串最多只能有 {max_length} 个字符"),
    "too_short": ("{field_type} should have at least {min_length} item{s} after validation, not {actual_length}", "至少应有 {min_length} 项，实际为 {actual_length} 项"),
    "too_long": ("{field_type} should have at most {max_length} item{s} after validation, not {actual_length}", "最多只能有 {max_length} 项，实际为 {actual_length} 项"),
    "greater_than": ("Input should be greater than {gt}", "应大于 {gt}"),
    "greater_than_equal": ("Input should be greater than or equal to {ge}", "应大于或等于 {ge}"),
    "less_than": ("Input should be less than {lt}", "应小于 {lt}"),
    "less_than_equal": ("Input should be less than or equal to {le}", "应小于或等于 {le}"),
    "multiple_of": ("Input should be a multiple of {multiple_of}", "应为 {multiple_of} 的倍数"),
    "string_pattern_mismatch": ("String should match pattern '{pattern}'", "字符串应符合模式 '{pattern}'"),
    "union_tag_invalid": ("Input tag '{tag}' found using {discriminator} does not match any of the expected tags: {expected_tags}", "用 {discriminator} 找到的标签 '{tag}' 不是预期的任何一个：{expected_tags}"),
    "union_tag_not_found": ("Unable to extract tag using discriminator {discriminator}", "无法用 {discriminator} 取得标签"),
    "date_type": ("Input should be a valid date", "应为日期"),
    "datetime_type": ("Input should be a valid datetime", "应为日期时间"),
    "url_type": ("URL input should be a string or URL", "URL 应为字符串"),
}  # fmt: skip

# (the English plural's count for each template with ``{s}``)
_COUNTED = {
    "string_too_short": "min_length",
    "string_too_long": "max_length",
    "too_short": "min_length",
    "too_long": "max_length",
}


def _values(error: Mapping[str, Any]) -> dict[str, str]:
    ctx = error.get("ctx") or {}
    values = {
        k: str(int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in ctx.items()
    }  # (pydantic says 1, not 1.0)
    counted = _COUNTED.get(str(error.get("type")))
    if counted is not None:
        values["s"] = "" if values.get(counted) == "1" else "s"
    return values


def english(error: Mapping[str, Any]) -> str:
    """What a pydantic error says in English, from its type (its ``msg`` for a type no row
    has, or one whose values are missing)."""
    template = MESSAGES.get(str(error.get("type")))
    if template is not None:
        try:
            return template[0].format(**_values(error))
        except (KeyError, IndexError):
            pass
    return str(error.get("msg", "invalid request"))


def said(error: Mapping[str, Any], lang: str) -> str:
    """What a pydantic error says in ``lang`` (``zh`` or ``en``), from its type; a type no
    row has keeps pydantic's ``msg``."""
    template = MESSAGES.get(str(error.get("type")))
    if template is not None:
        try:
            return template[1 if lang == "zh" else 0].format(**_values(error))
        except (KeyError, IndexError):
            pass
    return english(error)


def _shape(template: str) -> str:
    """A template's English as a regular expression, its values as named groups."""
    out = ""
    for literal, name, _, _ in string.Formatter().parse(template):
        out += re.escape(literal)
        if name == "s":
            out += "s?"
        elif name:
            out += f"(?P<{name}>.+?)"
    return out


def _literal_length(template: str) -> int:
    return sum(len(literal) for literal, _, _, _ in string.Formatter().parse(template))


# The rows ``retrieval_svc.languages`` says them again with: ``path: <English>``, the most
# specific first ("Input should be {expected}" would read "…greater than 1" too).
ROWS: tuple[Reason, ...] = tuple(
    row(f"validation_{kind}", rf"^(?P<path>\S+): {_shape(en)}$", "{path}：" + zh)
    for kind, (en, zh) in sorted(MESSAGES.items(), key=lambda item: -_literal_length(item[1][0]))
)


def chinese_of(text: str) -> str | None:
    """A pydantic error as ``english`` says it, in Chinese; None when of no known type."""
    for _, (en, zh) in sorted(MESSAGES.items(), key=lambda item: -_literal_length(item[1][0])):
        if (found := re.fullmatch(_shape(en), text, re.S)) is not None:
            return zh.format(**found.groupdict())
    return None
