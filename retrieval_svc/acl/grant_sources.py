"""Which source gave each grant (design.md §17): a named directory sync, a SCIM key, or a hand
(the CLI, the console, a CSV import).

A person holds a role while any source gives it. Each source adds and removes only its own
grants: a grant is a ``casbin_rule`` line while at least one row here names it, so two
directory syncs mapping the same role never remove each other's members, and a hand revoke
never takes back what a directory gives. A role a directory sync owns is the directories'
to give: a sync takes back a hand's or SCIM's grant of it (made before the sync owned it;
after, both are refused), never another directory's. The rows are written in the same
transaction as the lines (``history.apply_in``). A line no row names was written before grants
knew their source: any source may take it over (by giving it) or remove it, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

TABLE = "grant_source"
HAND = "hand"  # the CLI, the console and CSV imports: one operator, several tools
Line = tuple[str, ...]  # a g line's values: (member, role, tenant)


@functools.cache
def _table() -> tuple[sa.MetaData, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    table = sa.Table(
        TABLE,
        meta,
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("member", sa.String(255), primary_key=True),
        sa.Column("role", sa.String(255), primary_key=True),
        sa.Column("source", sa.String(255), primary_key=True),
    )
    sa.Index(f"ix_{TABLE}_source", table.c.tenant, table.c.source)
    return meta, table


def ensure_table(engine: Engine) -> None:
    """Create the table if missing."""
    meta, table = _table()
    meta.create_all(engine, tables=[table])


def grantor(actor_name: str, actor_source: str) -> str:
    """The source a change by this actor gives grants as: ``ldap:<sync>``, ``scim:<key>``, or
    ``hand`` for the CLI, the console and CSV imports."""
    if actor_source == "ldap":
        return f"ldap:{actor_name}"
    if actor_source == "scim":
        return actor_name if actor_name.startswith("scim:") else f"scim:{actor_name}"
    return HAND


def directory(source: str) -> bool:
    """Whether ``source`` is a directory sync's."""
    return source.startswith("ldap:")


def taken_back_by(source: str, holders: set[str]) -> set[str]:
    """Which of a grant's ``holders`` a removal by ``source`` takes back: its own; and, for a
    directory sync — which removes only grants of the roles it owns, whose holders are its
    members — a hand's or SCIM's too, never another directory's."""
    if directory(source):
        return {h for h in holders if h == source or not directory(h)}
    return holders & {source}


def givers_in(conn: Connection, lines: Iterable[Line]) -> dict[Line, set[str]]:
    """The sources giving each of ``lines`` (g lines: member, role, tenant); a line no source
    gives is missing."""
    import sqlalchemy as sa

    _, table = _table()
    wanted = {line for line in lines if len(line) == 3}
    found: dict[Line, set[str]] = {}
    if not wanted:
        return found
    tenants = sorted({line[2] for line in wanted})
    members = sorted({line[0] for line in wanted})
    for i in range(0, len(members), 500):
        query = sa.select(table.c.member, table.c.role, table.c.tenant, table.c.source).where(
            table.c.tenant.in_(tenants), table.c.member.in_(members[i : i + 500])
        )
        for row in conn.execute(query):
            line = (row.member, row.role, row.tenant)
            if line in wanted:
                found.setdefault(line, set()).add(row.source)
    return found


def give_in(conn: Connection, source: str, lines: Iterable[Line]) -> None:
    """Record that ``source`` gives each of ``lines`` (not given by it yet)."""
    import sqlalchemy as sa

    _, table = _table()
    rows = [
        {"tenant": t, "member": m, "role": r, "source": source} for m, r, t in sorted(set(lines))
    ]
    if rows:
        conn.execute(sa.insert(table), rows)


def take_in(conn: Connection, sources: Iterable[str], line: Line) -> None:
    """Record that ``sources`` no longer give ``line``."""
    import sqlalchemy as sa

    _, table = _table()
    member, role, tenant = line
    conn.execute(
        sa.delete(table).where(
            table.c.tenant == tenant,
            table.c.member == member,
            table.c.role == role,
            table.c.source.in_(sorted(set(sources))),
        )
    )


def held_in(conn: Connection, tenant: str, source: str) -> set[Line]:
    """The g lines ``source`` gives in ``tenant``."""
    import sqlalchemy as sa

    _, table = _table()
    query = sa.select(table.c.member, table.c.role).where(
        table.c.tenant == tenant, table.c.source == source
    )
    return {(row.member, row.role, tenant) for row in conn.execute(query)}


def sourced_in(conn: Connection, tenant: str) -> dict[Line, set[str]]:
    """Every g line of ``tenant`` some source gives, with its sources."""
    import sqlalchemy as sa

    _, table = _table()
    query = sa.select(table.c.member, table.c.role, table.c.source).where(table.c.tenant == tenant)
    found: dict[Line, set[str]] = {}
    for row in conn.execute(query):
        found.setdefault((row.member, row.role, tenant), set()).add(row.source)
    return found


def rename_in(conn: Connection, tenant: str, old: str, new: str) -> int:
    """Make every grant ``old`` gives in ``tenant`` ``new``'s (a sync renamed in its file,
    ``renamed_from``); the number taken over."""
    import sqlalchemy as sa

    _, table = _table()
    lines = held_in(conn, tenant, old)
    if not lines:
        return 0
    theirs = held_in(conn, tenant, new)
    conn.execute(sa.delete(table).where(table.c.tenant == tenant, table.c.source == old))
    give_in(conn, new, lines - theirs)
    return len(lines)
