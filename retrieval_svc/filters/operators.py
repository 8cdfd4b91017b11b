"""The operator table: every operator, the value it takes and the field kinds it applies to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

from retrieval_svc.filters.fields import Kind


class Op(StrEnum):
    """Filter operators (design.md §5)."""

    EQ = "eq"
    NE = "ne"
    IN = "in"
    NIN = "nin"
    ANY = "any"
    ALL = "all"
    NONE = "none"
    CONTAINS = "contains"
    NOT_CONTAINS = "not_contains"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    BETWEEN = "between"
    EXISTS = "exists"
    MISSING = "missing"
    BEFORE = "before"
    AFTER = "after"


class Arity(Enum):
    """The shape of an operator's value."""

    NONE = "no value"
    SCALAR = "one value"
    LIST = "a list of values"
    PAIR = "a list of two values [low, high]"


@dataclass(frozen=True, slots=True)
class OpSpec:
    """What an operator takes and where it applies."""

    arity: Arity
    kinds: frozenset[Kind]


_ALL = frozenset(Kind)
_EXACT = frozenset({Kind.KEYWORD, Kind.NUMBER, Kind.DATE, Kind.BOOLEAN})
_SETS = frozenset({Kind.KEYWORD, Kind.NUMBER})
_ORDERED = frozenset({Kind.NUMBER, Kind.DATE})
_TEXTUAL = frozenset({Kind.KEYWORD, Kind.TEXT})

OPERATORS: dict[Op, OpSpec] = {
    Op.EQ: OpSpec(Arity.SCALAR, _EXACT),
    Op.NE: OpSpec(Arity.SCALAR, _EXACT),
    Op.IN: OpSpec(Arity.LIST, _SETS),
    Op.NIN: OpSpec(Arity.LIST, _SETS),
    Op.ANY: OpSpec(Arity.LIST, _SETS),
    Op.ALL: OpSpec(Arity.LIST, _SETS),
    Op.NONE: OpSpec(Arity.LIST, _SETS),
    Op.CONTAINS: OpSpec(Arity.SCALAR, _TEXTUAL),
    Op.NOT_CONTAINS: OpSpec(Arity.SCALAR, _TEXTUAL),
    Op.PREFIX: OpSpec(Arity.SCALAR, frozenset({Kind.KEYWORD})),
    Op.SUFFIX: OpSpec(Arity.SCALAR, frozenset({Kind.KEYWORD})),
    Op.GT: OpSpec(Arity.SCALAR, _ORDERED),
    Op.GTE: OpSpec(Arity.SCALAR, _ORDERED),
    Op.LT: OpSpec(Arity.SCALAR, _ORDERED),
    Op.LTE: OpSpec(Arity.SCALAR, _ORDERED),
    Op.BETWEEN: OpSpec(Arity.PAIR, _ORDERED),
    Op.EXISTS: OpSpec(Arity.NONE, _ALL),
    Op.MISSING: OpSpec(Arity.NONE, _ALL),
    Op.BEFORE: OpSpec(Arity.SCALAR, frozenset({Kind.DATE})),
    Op.AFTER: OpSpec(Arity.SCALAR, frozenset({Kind.DATE})),
}
