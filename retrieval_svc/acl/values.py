"""Parsing role lists in every form they arrive in (DESIGN §3 and §7).

Accepted: a list of strings; JSON-array text (``'["运维工程师","物业经理"]'``, Dify's form);
Python-list text (``"['a', 'b']"``); comma-separated text (ASCII or full-width commas);
null, ``""`` and ``"[]"`` (no roles). Anything else is an error: an ACL that cannot be read
is never treated as public.
"""

from __future__ import annotations

import ast
import json
from typing import Any

MAX_ROLE_LENGTH = 256


class RoleValueError(ValueError):
    """A role list could not be parsed."""


def _clean(items: list[Any], raw: object) -> list[str]:
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise RoleValueError(f"role list {raw!r} holds a non-string element {item!r}")
        role = item.strip()
        if not role:
            raise RoleValueError(f"role list {raw!r} holds an empty role name")
        if len(role) > MAX_ROLE_LENGTH:
            raise RoleValueError(f"role name longer than {MAX_ROLE_LENGTH} characters")
        if role not in out:
            out.append(role)
    return out


def parse_roles(value: object) -> list[str]:
    """Parse a role list; ``[]`` means no roles. Raises :class:`RoleValueError`."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return _clean(list(value), value)
    if not isinstance(value, str):
        raise RoleValueError(f"roles must be a list or text, got {type(value).__name__}")
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
                raise RoleValueError(f"role list {value!r} is neither JSON nor a list") from exc
        if not isinstance(parsed, list):
            raise RoleValueError(f"role list {value!r} is not a list")
        return _clean(parsed, value)
    if text[0] in "{\"'":
        raise RoleValueError(f"role list {value!r} is not a list or comma-separated text")
    return _clean(text.replace("，", ",").split(","), value)
