"""The filter tree: pydantic models, bounds, and errors that point at the bad node.

Bounds are checked on the raw JSON first, iteratively, so a hostile body (deeply nested,
enormous lists) is refused before any recursive validation runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from retrieval_svc.acl.values import MAX_ITEMS
from retrieval_svc.errors import InvalidRequest, join_path
from retrieval_svc.filters.operators import OPERATORS, Arity, Op

MAX_DEPTH = 10
MAX_CONDITIONS = 200
MAX_LIST = MAX_ITEMS  # one bound for every list a caller sends
MAX_STRING = 1024

_SCALARS = (str, int, float, bool)


class Condition(BaseModel):
    """``{"field": NAME, "op": OP, "value": VALUE}``; value omitted for exists/missing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str = Field(min_length=1, max_length=256, description="Chunk field or metadata key.")
    op: Op
    value: Any = Field(
        None,
        validate_default=True,
        description="Text, number or boolean; a list of them for in/nin/any/all/none/between.",
    )

    @field_validator("value")
    @classmethod
    def _value_fits_op(cls, value: Any, info: ValidationInfo) -> Any:
        op = info.data.get("op")
        if op is None:
            return value  # the op error is reported instead
        items = value if isinstance(value, list) else [value]
        if value is not None and not all(isinstance(v, _SCALARS) for v in items):
            raise ValueError("values are text, numbers or booleans (a list of them for lists)")
        arity = OPERATORS[op].arity
        ok = {
            Arity.NONE: value is None,
            Arity.SCALAR: value is not None and not isinstance(value, list),
            Arity.LIST: isinstance(value, list) and len(value) > 0,
            Arity.PAIR: isinstance(value, list) and len(value) == 2,
        }[arity]
        if not ok:
            raise ValueError(f"operator {op.value!r} takes {arity.value}")
        return value


class And(BaseModel):
    """All of the filters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    and_: list[FilterNode] = Field(alias="and", min_length=1)


class Or(BaseModel):
    """At least one of the filters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    or_: list[FilterNode] = Field(alias="or", min_length=1)


class Not(BaseModel):
    """The filter does not hold (also true where its field is missing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    not_: FilterNode = Field(alias="not")


def _node_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("and", "or", "not"):
            if key in value:
                return f"~{key}"
        return "~condition"
    if isinstance(value, BaseModel):
        return {And: "~and", Or: "~or", Not: "~not", Condition: "~condition"}.get(type(value))
    return None


FilterNode = Annotated[
    Annotated[And, Tag("~and")]
    | Annotated[Or, Tag("~or")]
    | Annotated[Not, Tag("~not")]
    | Annotated[Condition, Tag("~condition")],
    Discriminator(
        _node_kind,
        custom_error_type="invalid_filter",
        custom_error_message="a filter is an object: {and: [...]}, {or: [...]}, {not: {...}} "
        "or {field, op, value}",
    ),
]

And.model_rebuild()
Or.model_rebuild()
Not.model_rebuild()
_ADAPTER: TypeAdapter[And | Or | Not | Condition] = TypeAdapter(FilterNode)


def check_bounds(raw: Any, root: str) -> None:
    """Refuse a raw filter over the bounds of design.md §5, naming where."""
    conditions = 0
    stack: list[tuple[Any, str, int]] = [(raw, root, 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidRequest(f"{path}: filters nest deeper than {MAX_DEPTH}", path=path)
        if not isinstance(node, dict):
            continue  # the structural validation explains what is wrong
        # Pushed in reverse so nodes are visited in document order (errors name the first).
        if "not" in node:
            stack.append((node["not"], f"{path}.not", depth + 1))
        for key in ("or", "and"):
            children = node.get(key)
            if isinstance(children, list):
                for i in reversed(range(len(children))):
                    stack.append((children[i], f"{path}.{key}[{i}]", depth + 1))
        if any(k in node for k in ("and", "or", "not")):
            continue
        conditions += 1
        if conditions > MAX_CONDITIONS:
            raise InvalidRequest(f"{path}: more than {MAX_CONDITIONS} conditions", path=path)
        value = node.get("value")
        values = value if isinstance(value, list) else [value]
        if len(values) > MAX_LIST:
            raise InvalidRequest(f"{path}.value: more than {MAX_LIST} values", path=f"{path}.value")
        for i, item in enumerate(values):
            if isinstance(item, str) and len(item) > MAX_STRING:
                where = f"{path}.value[{i}]" if isinstance(value, list) else f"{path}.value"
                raise InvalidRequest(f"{where}: longer than {MAX_STRING} characters", path=where)


def parse_filter(raw: Any, root: str = "filter") -> And | Or | Not | Condition:
    """A validated filter tree from JSON; InvalidRequest with the bad node's path otherwise."""
    check_bounds(raw, root)
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = join_path(root, tuple(first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidRequest(f"{path}: {message}", path=path) from exc
