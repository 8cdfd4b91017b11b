"""Where people's Windows SIDs live: one row per person and directory sync, holding the SIDs
that person holds (their own, and every group's they are in, transitively, their primary group
included), not one policy line per person and SID.

A domain of 50,000 people in 30–200 groups each is 1.5–10 million ``sid:`` grants as policy
lines: every reload parsed them all (3.3 ms a person). Here a person's SIDs are one text — each
domain's SID once, then the relative ids (``S-1-5-21-1-2-3:513,1104,1107``) — so the policy
reload reads one row a person, and a request decodes only the caller's row (``decode``, cached
by the loaded policy: ``retrieval_svc.acl.policy_index``).

Each row belongs to the sync that wrote it (``source``: ``ldap:<name>``), as a grant does
(design.md §17): a sync replaces only its own rows, in the same transaction as its grants, and
a person holds the SIDs any sync gives them. One row per sync and tenant, of subject
``KNOWN``, lists every SID that sync read (groups with no member included, disabled accounts'
too): ``known_in`` — the one query behind "which SIDs does this tenant's directory know"
(``retrieval_svc.acl.known_sids``, which the indexer asks). Every write gives its rows a
generation above every row there was before it (read before anything is deleted; the sync's
``KNOWN`` row rewritten with it), so the highest generation only grows and ``stamp_in`` (row
count, highest generation) changes with any write: the policy watcher reloads.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

TABLE = "directory_sid"
KNOWN = "*"  # (the subject of a sync's row of every SID it read; a person's is ``user:…``)


@functools.cache
def _table() -> tuple[sa.MetaData, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    table = sa.Table(
        TABLE,
        meta,
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("source", sa.String(255), primary_key=True),  # ldap:<sync name>
        sa.Column("subject", sa.String(255), primary_key=True),  # user:<id>, or KNOWN
        sa.Column("generation", sa.Integer, nullable=False, index=True),
        sa.Column("sids", sa.Text, nullable=False),  # ``encode``
    )
    return meta, table


def ensure_table(engine: Engine) -> None:
    meta, table = _table()
    meta.create_all(engine, tables=[table])


def encode(sids: Iterable[str]) -> str:
    """SIDs as one text: each prefix (the SID without its last part: a domain's SID) once,
    then the last parts, ``S-1-5-21-1-2-3:513,1104;S-1-1:0`` — sorted, so equal sets encode
    equal."""
    by_prefix: dict[str, set[int]] = {}
    for sid in sids:
        prefix, _, last = sid.rpartition("-")
        by_prefix.setdefault(prefix, set()).add(int(last))
    return ";".join(
        f"{prefix}:{','.join(str(r) for r in sorted(rids))}"
        for prefix, rids in sorted(by_prefix.items())
    )


def decode(text: str) -> frozenset[str]:
    """The SIDs ``encode`` wrote (texts joined by ``;`` decode to their union); a part that is
    not ``prefix:numbers`` gives nothing (a row never widens by being unreadable)."""
    out: set[str] = set()
    for part in text.split(";"):
        prefix, sep, rids = part.partition(":")
        if not sep or not prefix.startswith("S-1"):
            continue
        out.update(f"{prefix}-{r}" for r in rids.split(",") if r.isdigit())
    return frozenset(out)


def rows_in(conn: Connection, tenant: str, source: str) -> dict[str, str]:
    """The rows ``source`` wrote in ``tenant``: subject → encoded SIDs."""
    import sqlalchemy as sa

    _, table = _table()
    if not sa.inspect(conn).has_table(TABLE):
        return {}
    query = sa.select(table.c.subject, table.c.sids).where(
        table.c.tenant == tenant, table.c.source == source
    )
    return {row.subject: row.sids for row in conn.execute(query)}


def replace_in(
    conn: Connection,
    tenant: str,
    source: str,
    people: Mapping[str, Iterable[str]],
    known: Iterable[str],
) -> tuple[int, int]:
    """Make ``source``'s rows in ``tenant`` exactly ``people`` (subject → SIDs) and the row of
    every SID it read (``known``), inside the caller's transaction; a person with no SID has
    no row. The people whose row was written and removed."""
    import sqlalchemy as sa

    _, table = _table()
    wanted = {s: encode(sids) for s, sids in people.items()}
    wanted = {s: text for s, text in wanted.items() if text}
    if known_text := encode(known):
        wanted[KNOWN] = known_text
    before = rows_in(conn, tenant, source)
    gone = [s for s in before if s not in wanted]
    written = [s for s, text in wanted.items() if before.get(s) != text]
    if (written or gone) and KNOWN in wanted and KNOWN not in written:
        written.append(KNOWN)  # (rewritten at every change: it carries the new generation)
    # Read before any row is deleted: a row rewritten (a person out of a group and back in)
    # must get a generation above its own old one, else the stamp comes back unchanged.
    top = conn.execute(sa.select(sa.func.max(table.c.generation))).scalar() or 0
    mine = sa.and_(table.c.tenant == tenant, table.c.source == source)
    for i in range(0, len(gone), 500):
        conn.execute(sa.delete(table).where(mine, table.c.subject.in_(gone[i : i + 500])))
    changed = [s for s in written if s in before]
    for i in range(0, len(changed), 500):
        conn.execute(sa.delete(table).where(mine, table.c.subject.in_(changed[i : i + 500])))
    if written:
        rows = [
            {"tenant": tenant, "source": source, "subject": s, "generation": top + 1,
             "sids": wanted[s]}
            for s in written
        ]  # fmt: skip
        for i in range(0, len(rows), 2000):
            conn.execute(sa.insert(table), rows[i : i + 2000])
    people_written = sum(s != KNOWN for s in written)
    return people_written, sum(s != KNOWN for s in gone)


def rename_in(conn: Connection, tenant: str, old: str, new: str) -> None:
    """Make the rows source ``old`` wrote in ``tenant`` ``new``'s (a sync renamed in its file);
    rows ``new`` already has win."""
    import sqlalchemy as sa

    _, table = _table()
    theirs = rows_in(conn, tenant, old)
    mine = rows_in(conn, tenant, new)
    top = conn.execute(sa.select(sa.func.max(table.c.generation))).scalar() or 0  # (first)
    conn.execute(sa.delete(table).where(table.c.tenant == tenant, table.c.source == old))
    rows = [
        {"tenant": tenant, "source": new, "subject": s, "generation": top + 1, "sids": text}
        for s, text in theirs.items()
        if s not in mine
    ]
    if rows:
        conn.execute(sa.insert(table), rows)


def stamp_in(conn: Connection) -> tuple[Any, ...]:
    """What changes whenever a row does: the row count and the highest generation."""
    import sqlalchemy as sa

    _, table = _table()
    if not sa.inspect(conn).has_table(TABLE):
        return (0, None)
    return tuple(conn.execute(sa.select(sa.func.count(), sa.func.max(table.c.generation))).one())


def read_rows(engine: Engine) -> list[tuple[str, str, str]]:
    """Every person's row as (tenant, subject, encoded SIDs), for the policy in force (the
    ``KNOWN`` rows left out). None yet: nothing."""
    import sqlalchemy as sa

    _, table = _table()
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(TABLE):
            return []
        query = sa.select(table.c.tenant, table.c.subject, table.c.sids).where(
            table.c.subject != KNOWN
        )
        return [(row.tenant, row.subject, row.sids) for row in conn.execute(query)]


def known_in(engine: Engine, tenant: str) -> frozenset[str]:
    """Every SID the tenant's directory syncs read — each person's and each group's, a group
    with no member included — as ``S-1-…`` strings. Empty before any sync of an Active
    Directory (or where the database has no table yet)."""
    import sqlalchemy as sa

    _, table = _table()
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(TABLE):
            return frozenset()
        query = sa.select(table.c.sids).where(table.c.tenant == tenant, table.c.subject == KNOWN)
        return frozenset().union(*(decode(row.sids) for row in conn.execute(query)))
