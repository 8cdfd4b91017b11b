"""A history of every permission change (issue #35 §4, design.md §14), in the policy database.

A change and its record are one transaction: the rules are written to the adapter's table
(``casbin_rule``) by this module, beside an event (``policy_event``: when, actor, source,
tenant, action, counts) and its rules (``policy_change``: each added or removed line), so a
change that committed is in the history and a change that failed is in neither. A directory
sync that changes 500 grants is one event with its counts, and its 500 changes are rows a
query can find by subject or role.

The history lives where the policy does (not in the Elasticsearch audit indices, which may be
off, or a log stream, and whose queue may drop under pressure): a change is impossible without
the database, so its record always has a place to go.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from retrieval_svc.acl import grant_sources, owners
from retrieval_svc.acl.changes import Change, Rule
from retrieval_svc.acl.tables import MAX_DETAIL, tables

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

SOURCES = ("cli", "console", "ldap", "scim", "indexer")
MAX_LINE = 1024  # the width of a recorded change's line


@dataclass(frozen=True, slots=True)
class Actor:
    """Who changes the policy (``cli:alice``, ``console:ops-admin``, ``sync-ldap``,
    ``scim:okta``) and through what (one of ``SOURCES``)."""

    name: str
    source: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source {self.source!r} is not one of {', '.join(SOURCES)}")


@dataclass(slots=True)
class Event:
    """One recorded change of a tenant's policy, with its lines."""

    id: int
    at: datetime
    tenant: str
    actor: str
    source: str
    action: str
    added: int
    removed: int
    detail: str = ""
    changes: list[Change] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The event as ``audit policy --json`` prints it."""
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "tenant": self.tenant,
            "actor": self.actor,
            "source": self.source,
            "action": self.action,
            "added": self.added,
            "removed": self.removed,
            "detail": self.detail,
            "changes": [
                {"op": c.op, "ptype": c.ptype, "subject": c.subject, "target": c.target}
                for c in self.changes
            ],
        }


_EVENT_COLUMNS = ("at", "tenant", "actor", "source", "action", "added", "removed", "detail")


FEW = 100  # changes checked line by line (through the index) rather than by reading all


def _existing(conn: Connection, rules: sa.Table, wanted: list[Change]) -> set[tuple[str, Rule]]:
    """The lines of the table that ``wanted`` could touch, in one query inside the
    transaction: those with a wanted line's type and first two values for a few changes (a
    console grant, a SCIM write), every line of their types for many (a sync, an import)."""
    import sqlalchemy as sa

    columns = [rules.c.ptype, *(rules.c[f"v{i}"] for i in range(6))]
    if len(wanted) <= FEW:
        keys = {(c.ptype, c.values[0], c.values[1]) for c in wanted}
        where = sa.or_(
            *(sa.and_(rules.c.ptype == p, rules.c.v0 == a, rules.c.v1 == b) for p, a, b in keys)
        )
    else:
        where = rules.c.ptype.in_(sorted({c.ptype for c in wanted}))
    found = conn.execute(sa.select(*columns).where(where))
    return {(row[0], tuple(v for v in row[1:] if v is not None)) for row in found}


def apply(
    engine: Engine,
    rule_table: str,
    actor: Actor,
    action: str,
    changes: Iterable[Change],
    *,
    detail: str = "",
    at: datetime | None = None,
) -> list[Event]:
    """Apply ``changes`` in one transaction and record one event per tenant they touch (what
    was already so is not a change, and is not recorded). The events, empty when nothing
    changed; on any error nothing is changed and nothing recorded."""
    with engine.begin() as conn:
        return apply_in(conn, rule_table, actor, action, changes, detail=detail, at=at)


def apply_in(
    conn: Connection,
    rule_table: str,
    actor: Actor,
    action: str,
    changes: Iterable[Change],
    *,
    detail: str = "",
    at: datetime | None = None,
    strict: bool = False,
) -> list[Event]:
    """``apply`` inside the caller's transaction (a SCIM write and the grants it implies
    commit together). Role grants (``g`` lines) pass the owner model first
    (``owners.judge``: ``OwnerRefused`` naming the owner, nothing changed): each records the
    actor's source beside it and is removed only when no source gives it any more; with
    ``strict``, a removal another source's grant survives is refused too."""
    import sqlalchemy as sa

    _, rules, _, _ = tables(rule_table)
    moment = at or datetime.now(UTC)
    wanted = list(changes)
    done: list[Event] = []
    source = grant_sources.grantor(actor.name, actor.source)
    ruling = owners.judge(conn, source, wanted, strict=strict)
    present = _existing(conn, rules, wanted) if wanted else set()
    applied: dict[str, list[Change]] = {}
    inserts: list[dict[str, str]] = []
    deletes: list[Change] = []
    for change in wanted:
        line = (change.ptype, change.values)
        if change.op == "remove" and change.ptype == "g" and change.values in ruling.kept:
            continue  # (another source still gives it: it stays)
        if change.op == "add":
            if line in present:
                continue
            present.add(line)
            inserts.append(
                {"ptype": change.ptype, **{f"v{i}": v for i, v in enumerate(change.values)}}
            )
        elif change.op == "remove":
            if line not in present:
                continue
            present.discard(line)
            deletes.append(change)
        else:
            raise ValueError(f"unknown change {change.op!r}")
        applied.setdefault(change.tenant, []).append(change)
    owners.record_in(conn, source, ruling)
    if inserts:
        for width in sorted({len(row) for row in inserts}):  # (one statement per shape)
            conn.execute(sa.insert(rules), [row for row in inserts if len(row) == width])
    for change in deletes:
        clauses = [rules.c.ptype == change.ptype]
        clauses += [rules.c[f"v{i}"] == v for i, v in enumerate(change.values)]
        conn.execute(sa.delete(rules).where(sa.and_(*clauses)))
    for tenant, made in sorted(applied.items()):
        done.append(
            record_in(conn, rule_table, actor, action, tenant, made, detail=detail, at=moment)
        )
    return done


def record_in(
    conn: Connection,
    rule_table: str,
    actor: Actor,
    action: str,
    tenant: str,
    made: list[Change],
    *,
    detail: str = "",
    at: datetime | None = None,
) -> Event:
    """Record ``made`` (changes of one tenant, already applied) as one event, inside the
    caller's transaction."""
    import sqlalchemy as sa

    _, _, events, lines = tables(rule_table)
    added = sum(c.op == "add" for c in made)
    event = Event(
        id=0,
        at=at or datetime.now(UTC),
        tenant=tenant,
        actor=actor.name[:255],
        source=actor.source,
        action=action[:64],
        added=added,
        removed=len(made) - added,
        detail=detail[:MAX_DETAIL],
        changes=made,
    )
    row = {k: getattr(event, k) for k in _EVENT_COLUMNS}
    key = conn.execute(sa.insert(events).values(**row)).inserted_primary_key
    event.id = event_id = int(key[0]) if key else 0
    if not made:
        return event
    conn.execute(
        sa.insert(lines),
        [
            {
                "event_id": event_id,
                "op": c.op,
                "ptype": c.ptype,
                "subject": c.subject[:255],
                "target": c.target[:255],
                "line": _line(c),
            }
            for c in made
        ],
    )
    return event


def recent(
    engine: Engine,
    rule_table: str,
    *,
    since: datetime,
    tenant: str | None = None,
    subject: str | None = None,
    limit: int = 100,
    with_changes: int = 1000,
) -> list[Event]:
    """Events since ``since``, newest first, of one tenant or all, touching ``subject`` (a
    user id as ``user:<id>``, a role or a knowledge-base pattern) when named; each with up to
    ``with_changes`` of its lines."""
    import sqlalchemy as sa

    _, _, events, lines = tables(rule_table)
    query = sa.select(events).where(events.c.at >= since)
    if tenant is not None:
        query = query.where(events.c.tenant == tenant)
    if subject is not None:
        touching = sa.select(lines.c.event_id).where(
            sa.or_(lines.c.subject == subject, lines.c.target == subject)
        )
        query = query.where(events.c.id.in_(touching))
    query = query.order_by(events.c.at.desc(), events.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        found = [
            Event(
                id=row.id,
                at=row.at if row.at.tzinfo else row.at.replace(tzinfo=UTC),
                tenant=row.tenant,
                actor=row.actor,
                source=row.source,
                action=row.action,
                added=row.added,
                removed=row.removed,
                detail=row.detail or "",
            )
            for row in conn.execute(query)
        ]
        for event in found:
            rows = conn.execute(
                sa.select(lines)
                .where(lines.c.event_id == event.id)
                .order_by(lines.c.id)
                .limit(with_changes)
            )
            event.changes = [
                Change(r.op, r.ptype, _values(r.subject, r.target, r.line)) for r in rows
            ]
    return found


def _line(change: Change) -> str:
    """A change's line as stored: a JSON array (read back verbatim, never split), or, when
    longer than the column, its subject and target only."""
    text = json.dumps([change.ptype, *change.values], ensure_ascii=False)
    return text if len(text) <= MAX_LINE else ""


def _values(subject: str, target: str, line: str) -> Rule:
    if line.startswith("["):
        try:
            found = json.loads(line)
        except ValueError:
            found = None
        if isinstance(found, list) and len(found) > 1 and all(isinstance(v, str) for v in found):
            return tuple(found[1:])
        return (subject, target)
    # (a line recorded before lines were JSON: "g, member, role, tenant")
    parts = tuple(p.strip() for p in line.split(",")[1:])
    return parts if parts else (subject, target)


def diff(old: Sequence[Rule], new: Sequence[Rule], ptype: str) -> list[Change]:
    """The changes that turn the ``ptype`` lines ``old`` into ``new``."""
    before, after = set(old), set(new)
    return [Change("remove", ptype, r) for r in sorted(before - after)] + [
        Change("add", ptype, r) for r in sorted(after - before)
    ]
