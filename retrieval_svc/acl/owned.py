"""Which roles of a tenant a directory sync owns, recorded in the policy database.

A sync decides who holds the roles it owns: after it, their holders are exactly the members of
the groups that give them. What it owns is recorded here after every sync that applied, in the
same transaction as its changes, so the next sync owns what it owned before as well as what the
directory gives today: a group deleted or renamed in the directory gives no role any more, but
its role is still owned, so its grants are removed (a sync that recomputed ownership from
today's groups alone would never touch them again). The record then shrinks to today's roles.

Owned roles also refuse a grant by any other source, and any role inheriting them (the owner
model, ``retrieval_svc.acl.owners``): the next sync would remove it in silence, so every way in
says which sync owns the role instead.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

TABLE = "directory_owned_role"


@functools.cache
def _table() -> tuple[sa.MetaData, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    table = sa.Table(
        TABLE,
        meta,
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("role", sa.String(255), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),  # the sync: "ldap", or its name
    )
    return meta, table


def ensure_table(engine: Engine) -> None:
    """Create the table, and the syncs' runs (``ran_in``), if missing."""
    meta, table = _table()
    meta.create_all(engine, tables=[table])
    runs_meta, runs = _runs()
    runs_meta.create_all(engine, tables=[runs])


def owned_in(conn: Connection, tenant: str, owner: str | None = None) -> dict[str, str]:
    """The tenant's owned roles (of one ``owner``, or of every sync), role → owner."""
    import sqlalchemy as sa

    _, table = _table()
    query = sa.select(table.c.role, table.c.owner).where(table.c.tenant == tenant)
    if owner is not None:
        query = query.where(table.c.owner == owner)
    return {row.role: row.owner for row in conn.execute(query)}


def owned_roles(engine: Engine, tenant: str) -> dict[str, str]:
    """The tenant's owned roles, role → owner (none before any sync made the table)."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(TABLE):
            return {}
        return owned_in(conn, tenant)


def replace_in(conn: Connection, tenant: str, owner: str, roles: Iterable[str]) -> None:
    """Record that ``owner`` owns exactly ``roles`` in ``tenant`` (inside the sync's
    transaction). A role another sync of the tenant already owns stays that sync's."""
    import sqlalchemy as sa

    _, table = _table()
    conn.execute(sa.delete(table).where(table.c.tenant == tenant, table.c.owner == owner))
    others = owned_in(conn, tenant)
    rows = [{"tenant": tenant, "role": r, "owner": owner} for r in sorted(set(roles) - set(others))]
    if rows:
        conn.execute(sa.insert(table), rows)


def rename_in(conn: Connection, tenant: str, old: str, new: str) -> None:
    """Make the roles ``old`` owns in ``tenant`` ``new``'s (a sync renamed in its file)."""
    import sqlalchemy as sa

    _, table = _table()
    conn.execute(
        sa.update(table).where(table.c.tenant == tenant, table.c.owner == old).values(owner=new)
    )


RUNS = "directory_sync_run"


@functools.cache
def _runs() -> tuple[sa.MetaData, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    table = sa.Table(
        RUNS,
        meta,
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("first", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last", sa.DateTime(timezone=True), nullable=False),
    )
    return meta, table


def ran_in(conn: Connection, tenant: str, name: str, renamed_from: Iterable[str] = ()) -> None:
    """Record that the sync ``name`` applied a run in ``tenant`` now (its old names forgotten)."""
    import sqlalchemy as sa

    _, table = _runs()
    now = datetime.now(UTC)
    mine = sa.and_(table.c.tenant == tenant, table.c.name == name)
    if not conn.execute(sa.update(table).where(mine).values(last=now)).rowcount:
        conn.execute(sa.insert(table).values(tenant=tenant, name=name, first=now, last=now))
    old = sorted(set(renamed_from) - {name})
    if old:
        conn.execute(sa.delete(table).where(table.c.tenant == tenant, table.c.name.in_(old)))


def runs_in(conn: Connection, tenant: str) -> dict[str, tuple[datetime, datetime]]:
    """Each sync's first and last applied run in ``tenant`` (name → (first, last))."""
    import sqlalchemy as sa

    _, table = _runs()
    if not sa.inspect(conn).has_table(RUNS):
        return {}
    query = sa.select(table.c.name, table.c.first, table.c.last).where(table.c.tenant == tenant)
    return {row.name: (_aware(row.first), _aware(row.last)) for row in conn.execute(query)}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
