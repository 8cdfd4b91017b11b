"""The policy database's tables: the rules (``casbin_rule``, the shape pycasbin's SQLAlchemy
adapter gives it, so an existing table is read as it is) and the history of changes
(``policy_event``, ``policy_change``); rules read and deleted row by row, never parsed."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

MAX_DETAIL = 1024  # the width of an event's detail


@functools.cache
def tables(rule_table: str) -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    rules = sa.Table(
        rule_table,
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ptype", sa.String(255)),
        *(sa.Column(f"v{i}", sa.String(255)) for i in range(6)),
    )
    sa.Index(f"ix_{rule_table}_lookup", rules.c.ptype, rules.c.v0, rules.c.v1)
    events = sa.Table(
        "policy_event",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("tenant", sa.String(255), nullable=False, index=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("added", sa.Integer, nullable=False),
        sa.Column("removed", sa.Integer, nullable=False),
        sa.Column("detail", sa.String(MAX_DETAIL), nullable=False, default=""),
    )
    changes = sa.Table(
        "policy_change",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.Integer, sa.ForeignKey("policy_event.id"), index=True),
        sa.Column("op", sa.String(8), nullable=False),
        sa.Column("ptype", sa.String(8), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False, index=True),
        sa.Column("target", sa.String(255), nullable=False, index=True),
        sa.Column("line", sa.String(1024), nullable=False),
    )
    return meta, rules, events, changes


def ensure_tables(engine: Engine, rule_table: str) -> None:
    """Create the rule table (the shape pycasbin's SQLAlchemy adapter gives it) and the
    history tables if missing, and an index on the rules by (ptype, v0, v1), so checking a few
    lines never reads them all.

    Another process making them at the same moment (a watcher recording a rules edit while a
    command reads the history, a sync beside the service) makes one CREATE fail with "already
    exists" between its check and its statement: a second pass finds them made. Whatever
    still fails on the second pass is raised."""
    import sqlalchemy as sa

    try:
        _ensure_tables(engine, rule_table)
    except sa.exc.DBAPIError:
        _ensure_tables(engine, rule_table)


def _ensure_tables(engine: Engine, rule_table: str) -> None:
    import sqlalchemy as sa

    from retrieval_svc.acl import directory_sids, grant_sources, owned

    meta, rules, events, changes = tables(rule_table)
    existed = sa.inspect(engine).has_table(rule_table)
    meta.create_all(engine, tables=[rules, events, changes])  # (a new table with its index)
    grant_sources.ensure_table(engine)
    owned.ensure_table(engine)
    directory_sids.ensure_table(engine)
    if existed:  # (made by pycasbin's adapter, without the index)
        for index in rules.indexes:
            index.create(engine, checkfirst=True)


def rule_rows(engine: Engine, rule_table: str) -> list[tuple[int, Any, tuple[Any, ...]]]:
    """Every stored rule as (id, ptype, values), field by field (trailing empty columns left
    out), in id order; nothing is parsed. No table yet: no rules."""
    import sqlalchemy as sa

    _, rules, _, _ = tables(rule_table)
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(rule_table):
            return []
        found = conn.execute(sa.select(rules).order_by(rules.c.id)).all()
    return [(int(row.id), row.ptype, _values(row)) for row in found]


def delete_row(
    conn: Connection, rule_table: str, row_id: int
) -> tuple[Any, tuple[Any, ...]] | None:
    """Delete the rule with ``row_id``; its (ptype, values), or None when there is none."""
    import sqlalchemy as sa

    _, rules, _, _ = tables(rule_table)
    row = conn.execute(sa.select(rules).where(rules.c.id == row_id)).one_or_none()
    if row is None:
        return None
    conn.execute(sa.delete(rules).where(rules.c.id == row_id))
    return row.ptype, _values(row)


def _values(row: Any) -> tuple[Any, ...]:
    """A stored rule's values, v0 … v5 as stored, trailing empty columns left out."""
    values = [getattr(row, f"v{i}") for i in range(6)]
    while values and values[-1] in (None, ""):
        values.pop()
    return tuple(values)
