"""Parsing lists in every form they arrive in (design.md §3 and §7).

Accepted: a list; JSON-array text (``'["运维工程师","物业经理"]'``, Dify's form); Python-list
text (``"['a', 'b']"``); comma-separated text (ASCII or full-width commas); null, ``""`` and
``"[]"`` (empty). Anything else is an error: in particular an ACL that cannot be read is
never treated as public.

Every list has the same bound wherever it enters (``MAX_ITEMS``: roles, ``in`` values,
knowledge ids): a longer one is refused before its items are looked at, and parsing is linear
in the input, so no request can hold the event loop (a quadratic de-duplication once made a
1 MB role list take a minute, and every other request with it).
"""

from __future__ import annotations

import ast
import json

MAX_ROLE_LENGTH = 256
MAX_ID_LENGTH = 256  # a knowledge-base, document or chunk id a caller names, on every route
MAX_ITEMS = 1024  # items in any list a caller sends (design.md §5's bound on filter lists)

Item = str | int | float


class ListValueError(ValueError):
    """A list value could not be parsed."""


RoleValueError = ListValueError


def _too_many(what: str, max_items: int) -> ListValueError:
    return ListValueError(f"{what} has more than {max_items} items")


def _items(value: object, what: str, max_items: int) -> list[object]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        if len(value) > max_items:
            raise _too_many(what, max_items)
        return list(value)
    if not isinstance(value, str):
        raise ListValueError(f"{what} must be a list or text, got {type(value).__name__}")
    text = value.strip()
    if not text:
        return []
    # Counting separators is linear and cheap: text with too many items is refused before it
    # is split or handed to ``ast`` (JSON is parsed in C, then counted).
    too_long = text.count(",") + text.count("，") >= max_items
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except RecursionError:  # nested deeper than the parser goes: no list of names
            raise ListValueError(f"{what} is nested too deeply") from None
        except json.JSONDecodeError:
            if too_long:
                raise _too_many(what, max_items) from None
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError, RecursionError, MemoryError) as exc:
                raise ListValueError(f"{what} {_shown(value)} is neither JSON nor a list") from exc
        if not isinstance(parsed, list):
            raise ListValueError(f"{what} {_shown(value)} is not a list")
        if len(parsed) > max_items:
            raise _too_many(what, max_items)
        return parsed
    if text[0] in "{\"'":
        raise ListValueError(f"{what} {_shown(value)} is not a list or comma-separated text")
    if too_long:
        raise _too_many(what, max_items)
    return list(text.replace("，", ",").split(","))


def _shown(value: object, limit: int = 80) -> str:
    """``value`` for an error message, cut: a message never echoes a megabyte back."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_list(value: object, *, what: str = "list", max_items: int = MAX_ITEMS) -> list[Item]:
    """A list of strings and numbers, duplicates dropped (first kept); text elements are
    trimmed and must not be empty. More than ``max_items`` items is an error."""
    out: dict[Item, None] = {}  # ordered, and a linear de-duplication
    for item in _items(value, what, max_items):
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ListValueError(f"{what} {_shown(value)} holds an unsupported element {item!r}")
        if isinstance(item, str):
            item = item.strip()
            if not item:
                raise ListValueError(f"{what} {_shown(value)} holds an empty element")
        out.setdefault(item, None)
    if len(out) > max_items:  # (JSON text: counted once parsed)
        raise _too_many(what, max_items)
    return list(out)


def parse_roles(value: object) -> list[str]:
    """Parse a role list; ``[]`` means no roles. Raises :class:`RoleValueError`."""
    roles: list[str] = []
    for item in parse_list(value, what="role list"):
        if not isinstance(item, str):
            raise RoleValueError(f"role list {_shown(value)} holds a non-text role {item!r}")
        if len(item) > MAX_ROLE_LENGTH:
            raise RoleValueError(f"role name longer than {MAX_ROLE_LENGTH} characters")
        roles.append(item)
    return roles
