"""Dify's flat ``metadata_condition``: identity conditions become claims, the rest one filter
with the meaning Dify's own knowledge base gives each operator (docs/filters.md).

Conditions named after an identity (by default ``user_id``; ``user_roles`` and
``access_roles`` for roles; ``principal_token``) are not filters but the caller's claims about
the end user, honoured according to the API key's mode (``retrieval_svc.auth.identity``). Only
positive operators carry a claim; any other operator on an identity name is refused, so a
condition can never grant by accident.

Every other condition is translated here once, into a ``DifyFilter`` whose leaves keep the
caller's path (``metadata_condition.conditions[2]``) for errors, following Dify's built-in
filter (``process_metadata_filter_func``):

* a condition whose value is null is ignored, except ``empty`` / ``not empty``;
* ``is`` / ``is not`` take a text or a number (a list is ignored, as Dify ignores it);
* ``contains`` and friends compare the value's text;
* ``in`` / ``not in`` take a list, JSON-array or comma text; an empty one means "nothing" for
  ``in`` and "everything" for ``not in``;
* a null ``logical_operator`` joins with OR (Dify's ``and_ if "and" else or_``); an absent one
  is AND (its model default).

What the leaves mean in Elasticsearch is ``retrieval_svc.filters.dify_compiler``'s concern.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from retrieval_svc.acl.values import ListValueError, parse_list, parse_roles
from retrieval_svc.auth.identity import Claims, refuse_template
from retrieval_svc.dify.schemas import DifyCondition, MetadataCondition
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters.tree import MAX_CONDITIONS, MAX_LIST, MAX_STRING


class DifyOp(StrEnum):
    """Dify's comparison operators, aliases folded (``=`` is ``is``, ``after`` is ``>``…)."""

    CONTAINS = "contains"
    NOT_CONTAINS = "not contains"
    START_WITH = "start with"
    END_WITH = "end with"
    IS = "is"
    IS_NOT = "is not"
    IN = "in"
    NOT_IN = "not in"
    EMPTY = "empty"
    NOT_EMPTY = "not empty"
    GT = ">"
    LT = "<"
    GTE = "≥"
    LTE = "≤"


DIFY_OPERATORS: dict[str, DifyOp] = {
    **{op.value: op for op in DifyOp},
    "=": DifyOp.IS,
    "≠": DifyOp.IS_NOT,
    "!=": DifyOp.IS_NOT,
    ">=": DifyOp.GTE,
    "<=": DifyOp.LTE,
    "before": DifyOp.LT,  # Dify: as_float() < value, i.e. an earlier instant
    "after": DifyOp.GT,
}

# Operators that carry a claim on an identity name: each says "the user has this".
CLAIM_OPERATORS = frozenset({DifyOp.IS, DifyOp.CONTAINS, DifyOp.IN})
NEGATIONS = {
    DifyOp.IS_NOT: DifyOp.IS,
    DifyOp.NOT_CONTAINS: DifyOp.CONTAINS,
    DifyOp.NOT_IN: DifyOp.IN,
}
TEXT_OPS = frozenset({DifyOp.CONTAINS, DifyOp.NOT_CONTAINS, DifyOp.START_WITH, DifyOp.END_WITH})
ORDER_OPS = frozenset({DifyOp.GT, DifyOp.LT, DifyOp.GTE, DifyOp.LTE})

Value = str | int | float | tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class DifyLeaf:
    """One condition: field name, operator, value as Dify would use it, the caller's path."""

    field: str
    op: DifyOp
    value: Value
    path: str


@dataclass(frozen=True, slots=True)
class DifyFilter:
    """Dify's flat filter: leaves joined by AND, or by OR when ``any_of``."""

    leaves: tuple[DifyLeaf, ...]
    any_of: bool = False


@dataclass(frozen=True, slots=True)
class IdentityNames:
    """Condition names that carry identity claims rather than filters."""

    user_id: Collection[str] = ("user_id",)
    roles: Collection[str] = ("user_roles", "access_roles")
    token: Collection[str] = ("principal_token",)

    def __contains__(self, name: object) -> bool:
        return name in self.user_id or name in self.roles or name in self.token


def _name(cond: DifyCondition, path: str) -> str:
    name = cond.name
    if isinstance(name, list):
        if len(name) != 1 or not isinstance(name[0], str):
            raise InvalidRequest(
                f"{path}.name: a list name must hold one text", path=f"{path}.name"
            )
        name = name[0]
    name = name.strip()
    if not name:
        raise InvalidRequest(f"{path}.name: empty condition name", path=f"{path}.name")
    return name


def _op(cond: DifyCondition, path: str) -> DifyOp:
    op = DIFY_OPERATORS.get(cond.comparison_operator.strip())
    if op is None:
        known = ", ".join(repr(k) for k in DIFY_OPERATORS)
        where = f"{path}.comparison_operator"
        raise InvalidRequest(
            f"{where}: unknown operator {cond.comparison_operator!r}; known: {known}", path=where
        )
    return op


def _conflict(path: str, why: str) -> InvalidRequest:
    """One request states one identity: a second claim is refused, never "last one wins"."""
    return InvalidRequest(
        f"{path}: {why}; send each identity claim once", path=path, reason="identity_condition"
    )


def _scalar(value: Any, path: str) -> Any:
    if isinstance(value, list):
        if len(value) == 1:
            return value[0]
        raise InvalidRequest(f"{path}.value: expected one value", path=f"{path}.value")
    return value


def _claim_text(value: Any, path: str) -> str | None:
    value = _scalar(value, path)
    if value is None:
        return None
    if not isinstance(value, str | int):
        raise InvalidRequest(f"{path}.value: expected text", path=f"{path}.value")
    return str(value).strip() or None


def _text(value: str, path: str) -> str:
    if len(value) > MAX_STRING:
        where = f"{path}.value"
        raise InvalidRequest(f"{where}: longer than {MAX_STRING} characters", path=where)
    return value


def value_list(value: Any, path: str) -> tuple[str, ...]:
    """``in`` / ``not in`` values as Dify reads them: a list's non-null items as text, a text
    split on commas with empty pieces dropped, any other value as its text. JSON-array and
    Python-list text (Dify stringifies variables) are read as lists."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = parse_list(value, what="value")
        except ListValueError as exc:
            raise InvalidRequest(f"{path}.value: {exc}", path=f"{path}.value") from None
    if isinstance(value, str):
        items = [v.strip() for v in value.replace("，", ",").split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        items = [str(v) for v in value if v is not None]
    else:
        items = [str(value)]
    if len(items) > MAX_LIST:
        raise InvalidRequest(f"{path}.value: more than {MAX_LIST} values", path=f"{path}.value")
    return tuple(_text(i, path) for i in items)


def _leaf(name: str, op: DifyOp, value: Any, path: str) -> DifyLeaf | None:
    """The leaf for one filter condition, or None where Dify would ignore it."""
    if op in (DifyOp.EMPTY, DifyOp.NOT_EMPTY):
        return DifyLeaf(name, op, None, path)
    if value is None:
        return None  # Dify: "if value is None and condition not in (empty, not empty)"
    if op in (DifyOp.IN, DifyOp.NOT_IN):
        return DifyLeaf(name, op, value_list(value, path), path)
    if op in TEXT_OPS:
        return DifyLeaf(
            name, op, _text(value if isinstance(value, str) else str(value), path), path
        )
    if op in (DifyOp.IS, DifyOp.IS_NOT):
        if isinstance(value, str):
            return DifyLeaf(name, op, _text(value, path), path)
        if isinstance(value, int | float):  # bool included: Dify compares it as a number
            return DifyLeaf(name, op, float(value) if isinstance(value, bool) else value, path)
        return None  # a list or an object: Dify's match has no case for it
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        where = f"{path}.value"
        raise InvalidRequest(f"{where}: {op.value!r} compares with a number or a date", path=where)
    return DifyLeaf(name, op, _text(value, path) if isinstance(value, str) else value, path)


def translate(
    condition: MetadataCondition | None,
    names: IdentityNames | None = None,
    root: str = "metadata_condition",
) -> tuple[DifyFilter | None, Claims]:
    """The filter (or None) and the identity claims in a Dify metadata_condition."""
    names = names or IdentityNames()
    if condition is None:
        return None, Claims()
    if len(condition.conditions) > MAX_CONDITIONS:
        where = f"{root}.conditions"
        raise InvalidRequest(f"{where}: more than {MAX_CONDITIONS} conditions", path=where)
    user_id: str | None = None
    user_id_path = f"{root}.conditions"
    roles: list[str] | None = None
    token: str | None = None
    claimed_at: dict[str, str] = {}  # what was claimed (user_id, token, roles), and where
    leaves: list[DifyLeaf] = []
    for i, cond in enumerate(condition.conditions):
        path = f"{root}.conditions[{i}]"
        name = _name(cond, path)
        op = _op(cond, path)
        if name in names:
            if op not in CLAIM_OPERATORS:
                where = f"{path}.comparison_operator"
                allowed = ", ".join(sorted(o.value for o in CLAIM_OPERATORS))
                raise InvalidRequest(
                    f"{where}: {name!r} names the end user's identity; only {allowed} state "
                    f"it (operator {cond.comparison_operator!r} could widen access: refused)",
                    path=where,
                    reason="identity_condition",
                )
            if cond.value is None:
                continue  # Dify: a condition without a value is ignored
            refuse_template(f"{path}.value", name, cond.value)
            kind = (
                "user_id" if name in names.user_id else "token" if name in names.token else "roles"
            )
            if earlier := claimed_at.get(kind):
                raise _conflict(path, f"repeats the identity claim of {earlier}")
            rival = {"user_id": "token", "token": "user_id"}.get(kind, "")
            if earlier := claimed_at.get(rival):
                raise _conflict(path, f"conflicts with the identity claim of {earlier}")
            claimed_at[kind] = path
            if kind == "user_id":
                user_id = _claim_text(cond.value, path)
                user_id_path = f"{path}.value"
            elif kind == "token":
                token = _claim_text(cond.value, path)
            else:
                try:
                    roles = sorted(
                        set(
                            parse_roles(
                                _scalar(cond.value, path)
                                if not isinstance(cond.value, list)
                                else cond.value
                            )
                        )
                    )
                except ListValueError as exc:
                    raise InvalidRequest(f"{path}.value: {exc}", path=f"{path}.value") from None
            continue
        leaf = _leaf(name, op, cond.value, path)
        if leaf is not None:
            leaves.append(leaf)
    claims = Claims(
        user_id=user_id,
        roles=tuple(roles) if roles is not None else None,
        token=token,
        user_id_path=user_id_path,
    )
    if not leaves:
        return None, claims
    return DifyFilter(tuple(leaves), any_of=condition.logical_operator != "and"), claims
