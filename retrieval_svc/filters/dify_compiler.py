"""Compiling a ``DifyFilter`` to Elasticsearch with Dify's built-in semantics (pure).

Dify's own knowledge base filters documents in SQL over their JSON metadata, so a document
that lacks a field matches no operator but ``empty``; that includes the negations, which
therefore compile to "has the field AND NOT …" (the native language's negations also match
a missing field: that difference is the point of this module). A field no chunk has behaves
as a field every document lacks. Numbers written as text compare as numbers through the
field's numeric view (``metadata.x.num``), as Dify's ``as_float()`` does. Dates:

* ``is`` / ``is not`` compare calendar days in the configured zone: Dify's date picker sends
  Unix seconds of the user's local midnight, and date-only metadata means a whole day;
* ``before`` / ``after`` / ``<`` / ``>``… compare instants (Unix seconds, float seconds or
  date text; a text without a zone is read in the configured zone).
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from typing import Any

from retrieval_svc.errors import InvalidRequest
from retrieval_svc.filters.compiler import Query, escape_wildcard, finite_number, parse_date
from retrieval_svc.filters.cost import check_budget
from retrieval_svc.filters.dify import NEGATIONS, ORDER_OPS, DifyFilter, DifyLeaf, DifyOp
from retrieval_svc.filters.fields import FieldCatalog, FieldSpec, Kind

MATCH_ALL: Query = {"match_all": {}}
MATCH_NONE: Query = {"match_none": {}}
_BOUND = {DifyOp.GT: "gt", DifyOp.LT: "lt", DifyOp.GTE: "gte", DifyOp.LTE: "lte"}


def compile_dify(node: DifyFilter, catalog: FieldCatalog, tz: tzinfo) -> Query:
    """The Elasticsearch query for a Dify filter; InvalidRequest with the caller's path (or
    the costliest condition's, over the cost budget)."""
    clauses = [leaf_query(leaf, catalog.lookup(leaf.field), tz) for leaf in node.leaves]
    check_budget((leaf.path, clause) for leaf, clause in zip(node.leaves, clauses, strict=True))
    if len(clauses) == 1:
        return clauses[0]
    if node.any_of:
        return {"bool": {"should": clauses, "minimum_should_match": 1}}
    return {"bool": {"filter": clauses}}


def leaf_query(leaf: DifyLeaf, spec: FieldSpec | None, tz: tzinfo) -> Query:
    """One condition. ``spec`` None: no chunk has the field."""
    op = leaf.op
    if op in (DifyOp.IN, DifyOp.NOT_IN) and not leaf.value:
        return MATCH_NONE if op is DifyOp.IN else MATCH_ALL  # Dify: literal(op == "not in")
    if spec is None:
        if op in ORDER_OPS and _number(leaf, leaf.value) is None:
            # Dify casts the value to a number whatever the field: it fails where this cannot.
            raise _error(leaf, "value", f"expected a number, got {leaf.value!r}")
        return MATCH_ALL if op is DifyOp.EMPTY else MATCH_NONE
    has_field: Query = {"exists": {"field": spec.es_field}}
    if op is DifyOp.EMPTY:
        return {"bool": {"must_not": [has_field]}}
    if op is DifyOp.NOT_EMPTY:
        return has_field
    if op in NEGATIONS:
        positive = _positive(NEGATIONS[op], leaf, spec, tz)
        return {"bool": {"filter": [has_field], "must_not": [positive]}}
    return _positive(op, leaf, spec, tz)


def _error(leaf: DifyLeaf, part: str, message: str) -> InvalidRequest:
    where = f"{leaf.path}.{part}"
    return InvalidRequest(f"{where}: {message}", path=where)


def _positive(op: DifyOp, leaf: DifyLeaf, spec: FieldSpec, tz: tzinfo) -> Query:
    field, kind, value = spec.es_field, spec.kind, leaf.value
    if op in (DifyOp.CONTAINS, DifyOp.START_WITH, DifyOp.END_WITH):
        text = str(value)
        if kind is Kind.TEXT and op is DifyOp.CONTAINS:
            return {"match_phrase": {field: text}}
        if kind is not Kind.KEYWORD:  # Dify compares the value as written: its text view
            if spec.text_field is None:
                raise _error(
                    leaf,
                    "comparison_operator",
                    f"{op.value!r} compares text; {spec.name!r} holds {kind.value}s",
                )
            field = spec.text_field
        if op is DifyOp.START_WITH:
            return {"prefix": {field: text}}
        pattern = escape_wildcard(text)
        return {
            "wildcard": {
                field: {"value": f"*{pattern}" if op is DifyOp.END_WITH else f"*{pattern}*"}
            }
        }
    if op is DifyOp.IS:
        return _equals(leaf, spec, value, tz)
    if op is DifyOp.IN:
        assert isinstance(value, tuple)
        queries = [_equals(leaf, spec, item, tz) for item in value]
        terms = [q["term"] for q in queries if set(q) == {"term"}]
        fields = {next(iter(t)) for t in terms}
        if len(terms) == len(queries) and len(fields) == 1:  # one terms query instead of many
            return {"terms": {fields.pop(): [next(iter(t.values())) for t in terms]}}
        return {"bool": {"should": queries, "minimum_should_match": 1}}
    assert op in ORDER_OPS
    return {"range": {_ordered_field(leaf, spec): {_BOUND[op]: _ordered_value(leaf, spec, tz)}}}


def _number(leaf: DifyLeaf, value: Any) -> float | None:
    """``value`` read as a number as Dify reads it; None when it is no number (text that does
    not parse). A number beyond what can be compared (``inf``, ``nan``, 10**400) is a 400."""
    if not isinstance(value, bool) and isinstance(value, int | float):
        candidate: Any = value
    else:
        try:
            float(str(value).strip())
        except ValueError:
            return None
        candidate = str(value)
    try:
        return float(finite_number(candidate))
    except ValueError as exc:
        raise _error(leaf, "value", str(exc)) from None


def _day(leaf: DifyLeaf, value: Any, tz: tzinfo, field: str) -> Query:
    """The calendar day (in ``tz``) of a date value, as a range."""
    try:
        instant = parse_date(value, tz)
    except ValueError as exc:
        raise _error(leaf, "value", str(exc)) from None
    local = instant.astimezone(tz)
    start = datetime(local.year, local.month, local.day, tzinfo=tz)
    try:
        end = (start + timedelta(days=1)).replace(tzinfo=tz)
    except OverflowError:  # 9999-12-31 has no next day
        raise _error(leaf, "value", "a day of years 1 to 9998") from None
    return {"range": {field: {"gte": start.isoformat(), "lt": end.isoformat()}}}


def _equals(leaf: DifyLeaf, spec: FieldSpec, value: Any, tz: tzinfo) -> Query:
    """``is``: text against text, a number against the field read as a number."""
    field, kind = spec.es_field, spec.kind
    if kind is Kind.DATE:
        return _day(leaf, value, tz, field)
    if kind is Kind.NUMBER:
        if isinstance(value, str) and spec.text_field:  # Dify: text against the text written
            return {"term": {spec.text_field: value}}
        number = _number(leaf, value)
        return MATCH_NONE if number is None else {"term": {field: number}}
    if kind is Kind.BOOLEAN:
        text = str(value).strip().lower()
        if isinstance(value, int | float):
            return {"term": {field: bool(value)}}
        return {"term": {field: text == "true"}} if text in ("true", "false") else MATCH_NONE
    if kind is Kind.TEXT:
        return {"match_phrase": {field: str(value)}}
    if isinstance(value, str):
        return {"term": {field: value}}
    # A number against text: Dify compares the text read as a number.
    number = _number(leaf, value)
    assert number is not None  # (value is a number here)
    if spec.numeric_field:
        return {"term": {spec.numeric_field: number}}
    forms = {str(value), str(number)}
    if number.is_integer():
        forms.add(str(int(number)))
    return {"terms": {field: sorted(forms)}}


def _ordered_field(leaf: DifyLeaf, spec: FieldSpec) -> str:
    if spec.kind in (Kind.NUMBER, Kind.DATE):
        return spec.es_field
    if spec.kind is Kind.KEYWORD and spec.numeric_field:
        return spec.numeric_field
    raise _error(
        leaf,
        "comparison_operator",
        f"{leaf.op.value!r} compares numbers or dates; {spec.name!r} holds {spec.kind.value}s"
        + (" (re-index to compare its numbers)" if spec.kind is Kind.KEYWORD else ""),
    )


def _ordered_value(leaf: DifyLeaf, spec: FieldSpec, tz: tzinfo) -> Any:
    if spec.kind is Kind.DATE:
        try:
            return parse_date(leaf.value, tz).isoformat()
        except ValueError as exc:
            raise _error(leaf, "value", str(exc)) from None
    number = _number(leaf, leaf.value)
    if number is None:
        raise _error(leaf, "value", f"expected a number, got {leaf.value!r}")
    return number
