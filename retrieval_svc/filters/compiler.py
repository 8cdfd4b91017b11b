"""Compiling a filter tree to an Elasticsearch query (pure).

Values are always literals: they go into ``term``/``terms``/``range``/``prefix``/
``match_phrase`` clauses, and into ``wildcard`` only with ``*``, ``?`` and ``\\`` escaped.
Nothing is ever parsed as query syntax. Negations compile to ``must_not``, which also matches
documents where the field is missing (design.md §5).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo
from typing import Any

from retrieval_svc.errors import InvalidRequest, UnknownField
from retrieval_svc.filters.cost import check_budget
from retrieval_svc.filters.fields import FieldCatalog, FieldSpec, Kind
from retrieval_svc.filters.operators import OPERATORS, Op
from retrieval_svc.filters.tree import And, Condition, Not, Or

Query = dict[str, Any]


def _not(query: Query) -> Query:
    return {"bool": {"must_not": [query]}}


def escape_wildcard(value: str) -> str:
    """``value`` as a literal inside a wildcard pattern."""
    return value.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?")


MAX_LONG = 2**63 - 1  # Elasticsearch's long; a larger integer travels as a double


def _shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finite_number(value: Any) -> int | float:
    """A number filter value: finite, an integer only within Elasticsearch's ``long`` (a
    larger one as a double); ValueError otherwise (``inf``, ``nan``, ``1e400``, 10**400)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got true/false")
    try:
        if isinstance(value, int):
            if -MAX_LONG - 1 <= value <= MAX_LONG:
                return value
            number = float(value)
        elif isinstance(value, float):
            number = value
        else:
            number = float(str(value).strip())
    except (ValueError, OverflowError):
        raise ValueError(f"expected a finite number, got {_shown(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {_shown(value)}")
    return int(number) if number.is_integer() and abs(number) <= MAX_LONG else number


def parse_date(value: Any, tz: tzinfo = UTC) -> datetime:
    """An ISO date/datetime text, or Unix seconds (number or numeric text), as a datetime.

    A text without a zone (``2026-03-01``, ``2026-03-01 10:00``) is read in ``tz``, as the
    indexer reads date-only metadata values. A date that is not an instant of years 1 to 9999
    in UTC too (``1e20``, ``9999-12-31T23:59:59-23:59``) is a ValueError.
    """
    if isinstance(value, bool):
        raise ValueError("a date cannot be true/false")
    try:
        parsed = _parse_date(value, tz)
        parsed.astimezone(UTC)  # representable in UTC as well, where Elasticsearch reads it
    except (OverflowError, OSError, ValueError) as exc:
        if isinstance(exc, _NotADate):
            raise ValueError(str(exc)) from None
        raise ValueError(f"{_shown(value)} is not a date of years 1 to 9999") from None
    return parsed


class _NotADate(ValueError):
    pass


def _parse_date(value: Any, tz: tzinfo) -> datetime:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = None
        if seconds is not None:
            return datetime.fromtimestamp(seconds, UTC)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise _NotADate(f"{_shown(value)} is not an ISO date or Unix timestamp") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)
    raise _NotADate(f"{_shown(value)} is not a date")


def coerce(kind: Kind, value: Any, tz: tzinfo = UTC) -> Any:
    """A filter value as the field's kind needs it; ValueError if it cannot be."""
    if kind is Kind.NUMBER:
        return finite_number(value)
    if kind is Kind.DATE:
        return parse_date(value, tz).isoformat()
    if kind is Kind.BOOLEAN:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ValueError(f"expected true or false, got {_shown(value)}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _condition(cond: Condition, spec: FieldSpec, path: str, tz: tzinfo) -> Query:
    op, field, kind = cond.op, spec.es_field, spec.kind
    allowed = OPERATORS[op].kinds
    if kind not in allowed:
        kinds = ", ".join(sorted(k.value for k in allowed))
        raise InvalidRequest(
            f"{path}.op: operator {op.value!r} does not apply to {kind.value} field "
            f"{spec.name!r} (it applies to: {kinds})",
            path=f"{path}.op",
        )

    def value_at(item: Any, where: str) -> Any:
        try:
            return coerce(kind, item, tz)
        except ValueError as exc:
            raise InvalidRequest(f"{where}: {exc}", path=where) from None

    raw = cond.value
    if isinstance(raw, list):
        values = [value_at(v, f"{path}.value[{i}]") for i, v in enumerate(raw)]
        value = None
    else:
        values = []
        value = value_at(raw, f"{path}.value") if raw is not None else None

    if op is Op.EXISTS:
        return {"exists": {"field": field}}
    if op is Op.MISSING:
        return _not({"exists": {"field": field}})
    if op in (Op.EQ, Op.NE):
        query: Query = {"term": {field: value}}
        return query if op is Op.EQ else _not(query)
    if op in (Op.IN, Op.ANY):
        return {"terms": {field: values}}
    if op in (Op.NIN, Op.NONE):
        return _not({"terms": {field: values}})
    if op is Op.ALL:
        return {"bool": {"filter": [{"term": {field: v}} for v in values]}}
    if op in (Op.CONTAINS, Op.NOT_CONTAINS):
        if kind is Kind.TEXT:
            query = {"match_phrase": {field: value}}
        else:
            query = {"wildcard": {field: {"value": f"*{escape_wildcard(str(value))}*"}}}
        return query if op is Op.CONTAINS else _not(query)
    if op is Op.PREFIX:
        return {"prefix": {field: value}}
    if op is Op.SUFFIX:
        return {"wildcard": {field: {"value": f"*{escape_wildcard(str(value))}"}}}
    if op is Op.BETWEEN:
        low, high = values
        if low > high:
            raise InvalidRequest(
                f"{path}.value: low bound is above high bound", path=f"{path}.value"
            )
        return {"range": {field: {"gte": low, "lte": high}}}
    bound = {
        Op.GT: "gt",
        Op.GTE: "gte",
        Op.LT: "lt",
        Op.LTE: "lte",
        Op.BEFORE: "lt",
        Op.AFTER: "gt",
    }
    return {"range": {field: {bound[op]: value}}}


def compile_filter(
    node: And | Or | Not | Condition,
    catalog: FieldCatalog,
    path: str = "filter",
    tz: tzinfo = UTC,
) -> Query:
    """The Elasticsearch query for a filter tree; InvalidRequest naming the bad node, or the
    costliest condition of a tree over the cost budget (``filters/cost.py``).

    Date texts without a zone are read in ``tz``.
    """
    parts: list[tuple[str, Query]] = []
    query = _compile(node, catalog, path, tz, parts)
    check_budget(parts)
    return query


def _compile(
    node: And | Or | Not | Condition,
    catalog: FieldCatalog,
    path: str,
    tz: tzinfo,
    parts: list[tuple[str, Query]],
) -> Query:
    """``compile_filter`` below the root; each condition's query is added to ``parts``."""
    if isinstance(node, And):
        return {
            "bool": {
                "filter": [
                    _compile(c, catalog, f"{path}.and[{i}]", tz, parts)
                    for i, c in enumerate(node.and_)
                ]
            }
        }
    if isinstance(node, Or):
        return {
            "bool": {
                "should": [
                    _compile(c, catalog, f"{path}.or[{i}]", tz, parts)
                    for i, c in enumerate(node.or_)
                ],
                "minimum_should_match": 1,
            }
        }
    if isinstance(node, Not):
        return _not(_compile(node.not_, catalog, f"{path}.not", tz, parts))
    spec = catalog.lookup(node.field)
    if spec is None:
        raise UnknownField(node.field, catalog.known_names(), path=f"{path}.field")
    query = _condition(node, spec, path, tz)
    parts.append((path, query))
    return query
