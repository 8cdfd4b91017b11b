"""The owner model (design.md §17): which source may write which grant. Every way a role grant
is written — a directory sync, each SCIM key, the CLI's grant-role, revoke-role, delete and
import, role inheritance, the console — passes its ``g`` changes through ``judge``, inside the
transaction that applies them (``history.apply_in``; ``PolicyAdmin.delete_row``), so one
function decides for all of them and names the owner when it refuses.

The rules (docs/permissions.md, "Who gives a grant"):

* A grant is a ``casbin_rule`` line while at least one source gives it (``grant_sources``); a
  source adds and takes back only its own record, so a person holds a role while any source
  gives it.
* A role a directory sync owns (``owned``) is the directories' to give: a grant of it by any
  other source (a hand, a SCIM key, an import) is refused naming the sync, and so is making
  any role inherit it — the hierarchy would give it to people in none of its groups. A sync
  takes back a hand's or SCIM's grant of a role it owns (made before it owned the role), and
  an inheritance into it, never another directory's grant.
* A hand's removal (revoke-role, delete, import) of a line another source still gives leaves
  the line: ``Ruling.kept`` names who gives it; ``strict`` (delete, import: all or nothing)
  refuses the whole change instead.
* A line no source records was written before grants knew their source: any source may take
  it over (by giving it) or remove it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval_svc.acl import grant_sources, owned
from retrieval_svc.acl.changes import Change
from retrieval_svc.acl.errors import PolicyError
from retrieval_svc.acl.grant_sources import Line
from retrieval_svc.key_entry import USER_PREFIX
from retrieval_svc.words import say

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


class OwnerRefused(PolicyError):
    """A change the owner model refuses; nothing was changed. ``line``: the grant (member,
    role, tenant); ``owners``: the sources that decide it."""

    def __init__(self, message: str, line: Line, owners: Iterable[str]) -> None:
        super().__init__(message)
        self.line = line
        self.owners = tuple(sorted(owners))


@dataclass(slots=True)
class Ruling:
    """What ``judge`` decided for a batch of changes: the lines ``source`` now gives, the
    records each removal takes back, and the removals a line survives (still given by)."""

    give: list[Line] = field(default_factory=list)
    take: dict[Line, set[str]] = field(default_factory=dict)
    kept: dict[Line, set[str]] = field(default_factory=dict)


def _refusal(source: str, line: Line, owner: str) -> OwnerRefused:
    member, role, tenant = line
    if member.startswith(USER_PREFIX):
        why = say("owner_grant", role=role, tenant=tenant, owner=owner, source=source)
    else:
        why = say("owner_inherit", role=role, tenant=tenant, owner=owner, member=member)
    return OwnerRefused(why, line, [owner])


def kept_message(line: Line, givers: Iterable[str], done: str = "owner_nothing_changed") -> str:
    """Why ``line`` stays after a hand's removal: who still gives it (``done``: what the
    removal did, a ``words`` line)."""
    member, role, tenant = line
    by = ", ".join(sorted(givers))
    return say("owner_kept", member=member, role=role, tenant=tenant, givers=by, done=say(done))


def _kept_refusal(line: Line, givers: set[str]) -> OwnerRefused:
    return OwnerRefused(kept_message(line, givers), line, givers)


def judge(conn: Connection, source: str, changes: Iterable[Change], *, strict: bool) -> Ruling:
    """The owner model's decision on ``source``'s ``g`` changes (other changes pass): raises
    ``OwnerRefused`` for what it refuses, naming the owner; with ``strict``, also for a removal
    another source's grant survives. Records nothing: the caller applies the ruling."""
    wanted = [c for c in changes if c.ptype == "g" and len(c.values) == 3]
    ruling = Ruling()
    if not wanted:
        return ruling
    givers = grant_sources.givers_in(conn, [c.values for c in wanted])
    owners: dict[str, dict[str, str]] = {}
    for change in wanted:
        line = change.values
        holders = givers.setdefault(line, set())
        if change.op == "add":
            member, role, tenant = line
            if tenant not in owners:
                owners[tenant] = owned.owned_in(conn, tenant)
            owner = owners[tenant].get(role)
            inheriting = not member.startswith(USER_PREFIX)
            if owner is not None and (inheriting or not grant_sources.directory(source)):
                raise _refusal(source, line, owner)
            if source not in holders:
                holders.add(source)
                ruling.give.append(line)
        elif change.op == "remove":
            mine = grant_sources.taken_back_by(source, holders)
            if mine:
                holders -= mine
                ruling.take[line] = mine
            if holders:
                if strict:
                    raise _kept_refusal(line, holders)
                ruling.kept[line] = set(holders)
    return ruling


def record_in(conn: Connection, source: str, ruling: Ruling) -> None:
    """Record ``ruling``'s sources (inside the caller's transaction)."""
    for line, sources in ruling.take.items():
        grant_sources.take_in(conn, sources, line)
    grant_sources.give_in(conn, source, ruling.give)
