"""Who a caller's user id is: every id a person arrives with, resolved to the directory's id
(design.md §17).

Dify does not send the directory's ``uid``: a web app sends its own end-user UUID, the
service API whatever the calling backend put in ``user`` (often an e-mail), an OIDC token its
``sub`` or ``email``, a SCIM client its ``userName``. A person is known here by each of them:

* **directory syncs** store each person with the aliases their configuration names (LDAP
  ``mail``, ``userPrincipalName``…), replaced whole at each sync, so an alias removed in the
  directory stops resolving;
* **SCIM** users are known by ``userName``, every ``emails`` value and ``externalId``;
* **an explicit map** (``retrieval-svc identity map import FILE``) names ids no directory
  holds (a Dify web app's end-user UUIDs).

Ids are compared as the system that issued them compares them (``id_forms``), each by the
kind stored with it, decided from the configuration that read it (a sync's ``id_attribute``
and ``aliases``, SCIM's attribute, the map): an e-mail address's local part but for ASCII
case and its domain as IDNA2008 (``Wang@Corp.example`` is ``wang@corp.example``,
``faß.example`` is not ``fass.example``) — a directory's own ids too when they are read from
``mail`` —, Active Directory's names case-insensitively, other directory attributes under
``caseIgnoreMatch``, SCIM's ``userName`` case-insensitively, mapped ids and ``externalId``
exactly. An alias two people share resolves to nobody. A person's own id (the one grants name
in the key's tenant) wins over another's alias. Everything is decided within one tenant.

The table lives in the policy database beside the rules (``identity_alias``) and is read with
them, so a change reaches retrieval at the next policy check, like a grant.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from retrieval_svc.acl.id_forms import KINDS, MAX_COMPARED, Kind, compared, stored_kind
from retrieval_svc.names import name_problem

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

TABLE = "identity_alias"
PERSON = "id"  # the attribute of a row that names the person themself
# A row whose attribute begins so names an account the directory read as disabled or expired
# (``disabled:id``, ``disabled:mail``…): that id is no one, whatever else grants it.
DISABLED = "disabled:"

Status = Literal["none", "known", "alias", "unknown", "ambiguous"]


@dataclass(frozen=True, slots=True)
class Identity:
    """What a caller's user id resolved to.

    ``status``: ``none`` (no id sent), ``known`` (the id is a person's own), ``alias`` (it is
    one of a person's other ids), ``unknown`` (nobody has it), ``ambiguous`` (two or more
    people have it: it resolves to nobody)."""

    asked: str | None
    person: str | None
    status: Status
    via: str = ""  # how: "mail (ldap:sync-ldap)", "map"; for ambiguous, who shares it

    @property
    def unresolved(self) -> bool:
        """Whether an id was sent and names no one."""
        return self.status in ("unknown", "ambiguous")


NO_ONE = Identity(None, None, "none")


@dataclass(frozen=True, slots=True)
class Alias:
    """One stored row: ``alias`` (in its ``kind``'s compared form, ``id_forms``) names
    ``person`` in ``tenant``, said by ``source`` through ``attribute``."""

    tenant: str
    alias: str
    person: str
    source: str
    attribute: str
    kind: Kind


@dataclass(slots=True)
class Directory:
    """The aliases of every tenant, indexed for requests: tenant → kind → compared alias →
    (person, how), person None when people share it; and tenant → the people themselves."""

    aliases: dict[str, dict[Kind, dict[str, tuple[str | None, str]]]]
    people: dict[str, frozenset[str]]
    # tenant → kind → compared ids of accounts a directory read as disabled or expired → who
    # said so: no one, even where a hand grant or another source names the id.
    refused: dict[str, dict[Kind, dict[str, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[Alias]) -> Directory:
        found: dict[str, dict[Kind, dict[str, dict[str, str]]]] = {}
        people: dict[str, set[str]] = {}
        refused: dict[str, dict[Kind, dict[str, str]]] = {}
        for row in rows:
            if row.attribute.startswith(DISABLED):
                refused.setdefault(row.tenant, {}).setdefault(row.kind, {})[row.alias] = (
                    f"disabled or expired in {row.source}"
                )
                continue
            people.setdefault(row.tenant, set()).add(row.person)
            how = f"{row.attribute} ({row.source})"
            names = found.setdefault(row.tenant, {}).setdefault(row.kind, {})
            names.setdefault(row.alias, {}).setdefault(row.person, how)
        aliases: dict[str, dict[Kind, dict[str, tuple[str | None, str]]]] = {}
        for tenant, kinds in found.items():
            for kind, names in kinds.items():
                index: dict[str, tuple[str | None, str]] = {}
                for alias, whose in names.items():
                    if len(whose) == 1:
                        ((person, how),) = whose.items()
                        index[alias] = (person, how)
                    else:
                        index[alias] = (None, ", ".join(sorted(whose))[:300])
                aliases.setdefault(tenant, {})[kind] = index
        return cls(aliases, {t: frozenset(p) for t, p in people.items()}, refused)

    def resolve(self, user_id: str | None, tenant: str, *, granted: bool) -> Identity:
        """``user_id`` in ``tenant``; ``granted``: the tenant's policy names the id itself.
        The id is looked up as each kind of id compares (``id_forms``); ids of two kinds that
        name two people resolve to nobody."""
        if user_id is None:
            return NO_ONE
        for kind, ids in self.refused.get(tenant, {}).items():
            if (why := ids.get(compared(kind, user_id))) is not None:
                return Identity(user_id, None, "unknown", why)  # (Windows refuses its logon)
        if granted or user_id in self.people.get(tenant, ()):
            return Identity(user_id, user_id, "known")
        hits: dict[str | None, str] = {}
        for kind, index in self.aliases.get(tenant, {}).items():
            hit = index.get(compared(kind, user_id))
            if hit is not None:
                hits.setdefault(hit[0], hit[1])
        if not hits:
            return Identity(user_id, None, "unknown")
        if None in hits or len(hits) > 1:
            return Identity(user_id, None, "ambiguous", ", ".join(sorted(hits.values()))[:300])
        ((person, how),) = hits.items()
        assert person is not None
        if person == user_id:
            return Identity(user_id, person, "known")
        return Identity(user_id, person, "alias", how)


@dataclass(slots=True)
class Seen:
    """An id that resolved to no one, as the console lists it."""

    asked: str
    status: Status
    key: str
    count: int
    last: float


class Unresolved:
    """The ids that resolved to no one lately, per tenant (this process's; at most ``size``
    each, the least recently seen forgotten first), for the console."""

    def __init__(self, size: int = 200) -> None:
        self.size = size
        self._seen: dict[str, dict[tuple[str, str], Seen]] = {}

    def saw(self, tenant: str, key: str, identity: Identity) -> None:
        """Note one request whose id resolved to no one."""
        if identity.asked is None:
            return
        mine = self._seen.setdefault(tenant, {})
        entry = mine.pop((identity.asked, key), None)
        if entry is None:
            entry = Seen(identity.asked[:255], identity.status, key, 0, 0.0)
        entry.count, entry.last, entry.status = entry.count + 1, time.time(), identity.status
        mine[(identity.asked, key)] = entry  # (moved to the end: the most recent)
        while len(mine) > self.size:
            del mine[next(iter(mine))]

    def recent(self, tenant: str) -> list[Seen]:
        """The tenant's unresolved ids, most recently seen first."""
        return list(reversed(self._seen.get(tenant, {}).values()))


@functools.cache
def _table() -> tuple[sa.MetaData, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    table = sa.Table(
        TABLE,
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(255), nullable=False, index=True),
        sa.Column("alias", sa.String(255), nullable=False),
        sa.Column("person", sa.String(255), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),  # ldap:<sync>, scim, map
        sa.Column("attribute", sa.String(64), nullable=False),  # id, mail, userName, map…
        sa.Column("kind", sa.String(16), nullable=True),  # id_forms.Kind (NULL: stored before)
    )
    return meta, table


def ensure_table(engine: Engine) -> None:
    """Create the table if missing; give a table made before ids had stored kinds its
    ``kind`` column (its rows read as ``stored_kind`` says until rewritten)."""
    import sqlalchemy as sa

    meta, table = _table()
    meta.create_all(engine, tables=[table])
    columns = {c["name"] for c in sa.inspect(engine).get_columns(TABLE)}
    if "kind" not in columns:
        with engine.begin() as conn:
            conn.execute(sa.text(f"ALTER TABLE {TABLE} ADD COLUMN kind VARCHAR(16)"))


def _kind(source: str, attribute: str, kind: str | None) -> Kind:
    for known in KINDS:
        if kind == known:
            return known
    return stored_kind(source, attribute)


def read_rows(engine: Engine) -> list[Alias]:
    """Every stored alias (none before any sync or map made the table)."""
    import sqlalchemy as sa

    _, table = _table()
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        if not inspector.has_table(TABLE):
            return []
        # (a service reads a table no admin command has given its kind column yet: as stored)
        stored = {c["name"] for c in inspector.get_columns(TABLE)}
        kind = table.c.kind if "kind" in stored else sa.null().label("kind")
        found = conn.execute(
            sa.select(table.c.tenant, table.c.alias, table.c.person, table.c.source,
                      table.c.attribute, kind).order_by(table.c.id)
        ).all()  # fmt: skip
    return [Alias(t, a, p, s, at, _kind(s, at, k)) for t, a, p, s, at, k in found]


def stamp_in(conn: Connection) -> tuple[Any, ...]:
    """Cheap change detection: row count, highest id and total length of the aliases."""
    import sqlalchemy as sa

    _, table = _table()
    if not sa.inspect(conn).has_table(TABLE):
        return (0, None, None)
    lengths = sa.func.sum(sa.func.length(table.c.alias) + sa.func.length(table.c.person))
    row = conn.execute(sa.select(sa.func.count(), sa.func.max(table.c.id), lengths)).one()
    return tuple(row)


def entries_of(
    tenant: str,
    source: str,
    person: str,
    ids: Mapping[str, Iterable[str]],
    kinds: Mapping[str, Kind],
) -> tuple[set[Alias], list[str]]:
    """The rows that make ``person`` known in ``tenant`` by ``source``: the person's own id
    (of kind ``kinds[PERSON]``), and each value of ``ids`` (attribute → values, of kind
    ``kinds[attribute]``), each in its kind's compared form; empty values left out. And why
    any other could not be stored — a control character, a lone surrogate (no store holds
    one; PostgreSQL refuses NUL), a compared form (``ß`` may become ``ss``) longer than the
    store holds: that value is skipped and named, never the rest of the entry or the sync."""
    rows: set[Alias] = set()
    problems: list[str] = []
    for attribute, values in {PERSON: [person], **ids}.items():
        kind = kinds[attribute]
        for value in values:
            if not value or not value.strip():
                continue
            alias = compared(kind, value)
            problem = name_problem(attribute, alias.strip() or "?")
            if len(alias) > MAX_COMPARED:
                problem = f"{attribute} is {len(alias)} characters as compared (over "
                problem += f"{MAX_COMPARED})"
            if problem is not None:
                problems.append(
                    f"{person[:80]!r}: {problem}; that id is not stored, the rest of the entry is"
                )
                continue
            rows.add(Alias(tenant, alias, person, source, attribute, kind))
    return rows, problems


def replace_in(
    conn: Connection, tenant: str, source: str, rows: Iterable[Alias]
) -> tuple[int, int]:
    """Make ``source``'s aliases in ``tenant`` exactly ``rows`` (inside the caller's
    transaction); how many were added and removed."""
    import sqlalchemy as sa

    _, table = _table()
    where = sa.and_(table.c.tenant == tenant, table.c.source == source)
    columns = (table.c.id, table.c.alias, table.c.person, table.c.attribute, table.c.kind)
    now = {
        (r.alias, r.person, r.attribute, r.kind): r.id
        for r in conn.execute(sa.select(*columns).where(where))
    }  # (a row stored without its kind differs from every wanted one: it is rewritten)
    wanted = {(r.alias, r.person, r.attribute, r.kind) for r in rows}
    gone = [now[k] for k in now.keys() - wanted]
    for i in range(0, len(gone), 500):
        conn.execute(sa.delete(table).where(table.c.id.in_(gone[i : i + 500])))
    new = [
        {"tenant": tenant, "alias": a, "person": p, "source": source, "attribute": at,
         "kind": k}
        for a, p, at, k in sorted(wanted - now.keys())
    ]  # fmt: skip
    if new:
        conn.execute(sa.insert(table), new)
    return len(new), len(gone)


def replace_people_in(
    conn: Connection, tenant: str, source: str, people: Iterable[str], rows: Iterable[Alias]
) -> None:
    """Make ``source``'s aliases of ``people`` in ``tenant`` exactly ``rows`` (a SCIM write of
    one user: its old and new ``userName``), inside the caller's transaction."""
    import sqlalchemy as sa

    _, table = _table()
    names = sorted(set(people))
    if names:
        conn.execute(
            sa.delete(table).where(
                table.c.tenant == tenant, table.c.source == source, table.c.person.in_(names)
            )
        )
    new = [
        {"tenant": r.tenant, "alias": r.alias, "person": r.person, "source": source,
         "attribute": r.attribute, "kind": r.kind}
        for r in sorted(set(rows), key=lambda r: (r.alias, r.attribute))
    ]  # fmt: skip
    if new:
        conn.execute(sa.insert(table), new)


def map_of(conn: Connection, tenant: str) -> list[tuple[str, str]]:
    """The tenant's explicit map: (id, person), in id order (mapped ids are compared exactly:
    the id as it was imported, in NFC)."""
    import sqlalchemy as sa

    _, table = _table()
    query = (
        sa.select(table.c.alias, table.c.person)
        .where(table.c.tenant == tenant, table.c.source == "map")
        .order_by(table.c.alias)
    )
    return [(row.alias, row.person) for row in conn.execute(query)]


def rename_source_in(conn: Connection, tenant: str, old: str, new: str) -> None:
    """Make ``old``'s aliases in ``tenant`` ``new``'s (a SCIM key taking what was stored
    before each key kept its own)."""
    import sqlalchemy as sa

    _, table = _table()
    conn.execute(
        sa.update(table).where(table.c.tenant == tenant, table.c.source == old).values(source=new)
    )
