"""Parsing lists in every form they arrive in (design.md §3 and §7).

Accepted: a list; JSON-array text (``'["运维工程师","物业经理"]'``, Dify's form); Python-list
text (``"['a', 'b']"``); comma-separated text (ASCII or full-width commas); null, ``""`` and
``"[]"`` (empty). Anything else is an error: in particular an ACL that cannot be read is
never treated as public.
"""

from __future__ import annotations

import ast
import json

MAX_ROLE_LENGTH = 256

Item = str | int | float


class ListValueError(ValueError):
    """A list value could not be parsed."""


RoleValueError = ListValueError


def _items(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    if not isinstance(value, str):
        raise ListValueError(f"{what} must be a list or text, got {type(value).__name__}")
    text = value.strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError) as exc:
                raise ListValueError(f"{what} {value!r} is neither JSON nor a list") from exc
        if not isinstance(parsed, list):
            raise ListValueError(f"{what} {value!r} is not a list")
        return parsed
    if text[0] in "{\"'":
        raise ListValueError(f"{what} {value!r} is not a list or comma-separated text")
    return list(text.replace("，", ",").split(","))


def parse_list(value: object, *, what: str = "list") -> list[Item]:
    """A list of strings and numbers; text elements are trimmed and must not be empty."""
    out: list[Item] = []
    for item in _items(value, what):
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ListValueError(f"{what} {value!r} holds an unsupported element {item!r}")
        if isinstance(item, str):
            item = item.strip()
            if not item:
                raise ListValueError(f"{what} {value!r} holds an empty element")
        if item not in out:
            out.append(item)
    return out


def parse_roles(value: object) -> list[str]:
    """Parse a role list; ``[]`` means no roles. Raises :class:`RoleValueError`."""
    roles: list[str] = []
    for item in parse_list(value, what="role list"):
        if not isinstance(item, str):
            raise RoleValueError(f"role list {value!r} holds a non-text role {item!r}")
        if len(item) > MAX_ROLE_LENGTH:
            raise RoleValueError(f"role name longer than {MAX_ROLE_LENGTH} characters")
        roles.append(item)
    return roles
