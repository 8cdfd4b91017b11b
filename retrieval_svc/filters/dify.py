"""Dify's flat ``metadata_condition`` onto the filter tree, identity conditions onto claims.

Conditions named after an identity (by default ``user_id``; ``user_roles`` and
``access_roles`` for roles; ``principal_token``) are not filters but the caller's claims about
the end user, honoured according to the API key's mode (``retrieval_svc.auth.identity``).
Every other condition becomes a filter condition, ANDed with the ACL like any filter.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from retrieval_svc.acl.values import ListValueError, parse_list, parse_roles
from retrieval_svc.auth.identity import Claims
from retrieval_svc.dify.schemas import DifyCondition, MetadataCondition
from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters.operators import OPERATORS, Arity, Op
from retrieval_svc.filters.tree import And, Condition, Or, parse_filter

DIFY_OPERATORS: dict[str, Op] = {
    "contains": Op.CONTAINS,
    "not contains": Op.NOT_CONTAINS,
    "start with": Op.PREFIX,
    "end with": Op.SUFFIX,
    "is": Op.EQ,
    "is not": Op.NE,
    "in": Op.IN,
    "not in": Op.NIN,
    "empty": Op.MISSING,
    "not empty": Op.EXISTS,
    "=": Op.EQ,
    "≠": Op.NE,
    "!=": Op.NE,
    ">": Op.GT,
    "<": Op.LT,
    "≥": Op.GTE,
    ">=": Op.GTE,
    "≤": Op.LTE,
    "<=": Op.LTE,
    "before": Op.BEFORE,
    "after": Op.AFTER,
}


@dataclass(frozen=True, slots=True)
class IdentityNames:
    """Condition names that carry identity claims rather than filters."""

    user_id: Collection[str] = ("user_id",)
    roles: Collection[str] = ("user_roles", "access_roles")
    token: Collection[str] = ("principal_token",)


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


def _scalar(value: Any, path: str) -> Any:
    if isinstance(value, list):
        if len(value) == 1:
            return value[0]
        raise InvalidRequest(f"{path}.value: expected one value", path=f"{path}.value")
    return value


def _value(op: Op, value: Any, path: str) -> Any:
    arity = OPERATORS[op].arity
    if arity is Arity.NONE:
        return None
    if arity is Arity.SCALAR:
        value = _scalar(value, path)
        if value is None:
            raise InvalidRequest(f"{path}.value: a value is required", path=f"{path}.value")
        return value
    try:
        items = parse_list(value, what="value")
    except ListValueError as exc:
        raise InvalidRequest(f"{path}.value: {exc}", path=f"{path}.value") from None
    if not items:
        raise InvalidRequest(f"{path}.value: the list is empty", path=f"{path}.value")
    return items


def _claim_text(value: Any, path: str) -> str | None:
    value = _scalar(value, path)
    if value is None:
        return None
    if not isinstance(value, str | int):
        raise InvalidRequest(f"{path}.value: expected text", path=f"{path}.value")
    return str(value).strip() or None


def translate(
    condition: MetadataCondition | None,
    names: IdentityNames | None = None,
    root: str = "metadata_condition",
) -> tuple[And | Or | Condition | None, Claims]:
    """The filter tree (or None) and the identity claims in a Dify metadata_condition."""
    names = names or IdentityNames()
    if condition is None:
        return None, Claims()
    user_id: str | None = None
    roles: list[str] | None = None
    token: str | None = None
    raw_conditions: list[dict[str, Any]] = []
    positions: list[int] = []
    for i, cond in enumerate(condition.conditions):
        path = f"{root}.conditions[{i}]"
        name = _name(cond, path)
        if name in names.user_id:
            user_id = _claim_text(cond.value, path)
            continue
        if name in names.token:
            token = _claim_text(cond.value, path)
            continue
        if name in names.roles:
            try:
                claimed = parse_roles(
                    _scalar(cond.value, path) if not isinstance(cond.value, list) else cond.value
                )
            except ListValueError as exc:
                raise InvalidRequest(f"{path}.value: {exc}", path=f"{path}.value") from None
            roles = sorted({*(roles or []), *claimed})
            continue
        op = DIFY_OPERATORS.get(cond.comparison_operator.strip())
        if op is None:
            known = ", ".join(repr(k) for k in DIFY_OPERATORS)
            where = f"{path}.comparison_operator"
            raise InvalidRequest(
                f"{where}: unknown operator {cond.comparison_operator!r}; known: {known}",
                path=where,
            )
        raw_conditions.append(
            {"field": name, "op": op.value, "value": _value(op, cond.value, path)}
        )
        positions.append(i)
    claims = Claims(user_id=user_id, roles=tuple(roles) if roles is not None else None, token=token)
    if not raw_conditions:
        return None, claims
    nodes = []
    for raw, i in zip(raw_conditions, positions, strict=True):
        node = parse_filter(raw, root=f"{root}.conditions[{i}]")
        assert isinstance(node, Condition)
        nodes.append(node)
    if len(nodes) == 1:
        return nodes[0], claims
    if condition.logical_operator == "or":
        return Or.model_validate({"or": nodes}), claims
    return And.model_validate({"and": nodes}), claims
