"""From a directory's people and groups to a tenant's role grants (issue #35 §3), whoever read
them (LDAP today): nested groups expanded, groups mapped to roles, the difference with the
policy computed. Pure: no I/O.

The roles a mapping names are **owned by the directory** in that tenant: after a sync, the
users holding them are exactly the members of the groups that give them, so a member removed
from a group loses the role, and a grant of such a role made by hand is removed too. Roles the
mapping does not name are never touched. A sync also owns what it owned at its last run
(recorded in the policy database, ``retrieval_svc.acl.owned``): a group deleted or renamed in
the directory gives nothing now, and its grants go.

Who is who is checked before anything is decided: a user id no policy store can hold is
skipped and reported; two entries with one id as the directory compares it (``uid=bob`` in
``ou=staff`` and ``uid=Bob`` in ``ou=contractors``: ``(uid=BOB)`` finds both) are refused for
that id, naming both DNs — merged, the contractor would read what staff may. Every other
value the directory sends is checked one by one too: a group whose name cannot be a role
(``sales `` with its trailing space, a control character) gives no role by that name and is
named, an alias no store holds is left out and named; the rest of the sync goes on.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from retrieval_svc.acl.admin import checked_role
from retrieval_svc.acl.changes import Change
from retrieval_svc.acl.id_forms import Kind, compared
from retrieval_svc.acl.identities import DISABLED, PERSON, Alias, entries_of
from retrieval_svc.acl.policy_store import PolicyError, user_subject
from retrieval_svc.key_entry import SID_PREFIX
from retrieval_svc.names import name_problem


class DirectoryError(ValueError):
    """The directory cannot be synced; nothing was changed."""


class BindRefused(DirectoryError):
    """The directory refused the sync's bind (a wrong DN or password); nothing was changed."""

    def __init__(self, url: str, who: str, password_env: str) -> None:
        super().__init__(f"{url}: the directory refused the bind as {who}")
        self.url = url
        self.who = who
        self.password_env = password_env


class RemovalLimit(DirectoryError):
    """A sync that would remove more than its limits allow; nothing was changed. ``limit``
    names the one that stopped it: ``share`` or ``empty``."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one sync may remove (``--force`` lifts them for an intended reorganisation):
    at most ``max_removed_share`` of the directory's grants, except that removing up to
    ``removal_floor`` grants is always allowed (one person leaving a small tenant); and never
    every grant because the directory answered with nobody."""

    max_removed_share: float = 0.5
    removal_floor: int = 1
    force: bool = False


@functools.lru_cache(maxsize=1 << 18)  # (each person's DN comes again in every group of theirs)
def normal_dn(dn: str) -> str:
    """A DN as compared here: case and spaces around separators do not matter."""
    parts = [p.strip() for p in dn.split(",")]
    return ",".join("=".join(s.strip() for s in p.split("=", 1)) for p in parts).lower()


@dataclass(slots=True)
class Directory:
    """What was read: users (DN → id), groups (DN → name), and who is a direct member of
    which group (member DN → group DNs), all DNs normalised."""

    users: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)
    parents: dict[str, set[str]] = field(default_factory=dict)
    aliases: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # DN → attr → ids
    # The kind of each id (``id_forms``) by the attribute it was read from, the users' own
    # (``PERSON``) included: how the directory compares them, from the sync's configuration.
    kinds: dict[str, Kind] = field(default_factory=lambda: {PERSON: "directory"})
    # Active Directory (``ad.py``): each user's and group's SID (DN → S-1-…); a person holds
    # ``sid:`` roles for their own and every group's they are in. Disabled accounts left out
    # (how many), foreign principals nobody here holds (SID → the groups naming them).
    sids: dict[str, str] = field(default_factory=dict)
    # Groups read for their SIDs alone (AD's builtin groups when read beside ``groups.base``):
    # their names give no role. SIDs read whose holders are no one here (disabled and expired
    # accounts): known, so a deny naming one refuses no one (retrieval_svc.acl.known_sids).
    sid_only: set[str] = field(default_factory=set)
    unheld_sids: set[str] = field(default_factory=set)
    # SIDs of groups whose members were not all read (a member entry outside the searches,
    # nested or not): a share's deny naming one refuses every person (acl.known_sids).
    partial_sids: set[str] = field(default_factory=set)
    # Accounts left out as disabled or expired (DN → id, aliases): recorded so that no other
    # source (a hand grant) makes their ids a known person (retrieval_svc.acl.identities).
    refused: dict[str, tuple[str, dict[str, list[str]]]] = field(default_factory=dict)
    disabled: int = 0
    foreign: dict[str, list[str]] = field(default_factory=dict)

    def add_member(self, member: str, group: str) -> None:
        self.parents.setdefault(normal_dn(member), set()).add(normal_dn(group))

    def groups_of(self, dn: str) -> set[str]:
        """Every group ``dn`` is in, directly or through nested groups (cycles are fine)."""
        seen: set[str] = set()
        todo = deque(self.parents.get(dn, ()))
        while todo:
            group = todo.popleft()
            if group in seen:
                continue
            seen.add(group)
            todo.extend(self.parents.get(group, set()) - seen)
        return seen & self.groups.keys()


@dataclass(frozen=True, slots=True)
class RoleMapping:
    """Which groups give which roles: by group name (``cn``) or DN; with ``all_groups``, every
    group also gives the role of its own name."""

    by_group: Mapping[str, tuple[str, ...]]
    all_groups: bool = False

    def roles_of(self, dn: str, name: str) -> tuple[str, ...]:
        given = (*self.by_group.get(normal_dn(dn), ()), *self.by_group.get(name, ()))
        return (*given, name) if self.all_groups else given

    def owned(self, directory: Directory) -> set[str]:
        """The roles the directory decides (every role a mapped group can give; a group's
        own name only where it can be a role). SIDs are not roles of the policy: they are
        kept per person (``wanted_sids``), and no other source may give one (``sids``)."""
        roles = {role for given in self.by_group.values() for role in given}
        if self.all_groups:
            roles |= {
                n
                for dn, n in directory.groups.items()
                if dn not in directory.sid_only and _role_problem(n) is None
            }
        return roles


def _role_problem(name: str) -> str | None:
    try:
        checked_role("group", name)
    except PolicyError as exc:
        return str(exc)
    return None


def mapping(by_group: Mapping[str, Iterable[str]], all_groups: bool = False) -> RoleMapping:
    """A checked mapping: DN keys normalised, every role one a principal can hold."""
    checked: dict[str, tuple[str, ...]] = {}
    for group, roles in by_group.items():
        key = normal_dn(group) if "=" in group else group
        try:
            checked[key] = tuple(checked_role(f"the role of group {group!r}", r) for r in roles)
        except PolicyError as exc:
            raise DirectoryError(str(exc)) from None
    return RoleMapping(checked, all_groups)


def checked_users(directory: Directory) -> tuple[dict[str, str], list[str]]:
    """The directory's users (DN → id) that can be named, and why each other one cannot:
    an id no store can hold, or an id two entries share as the directory compares it (the
    comparison lookups use: ``uid=bob`` and ``uid=Bob`` are one id to ``caseIgnoreMatch``),
    refused for both, naming them."""
    kind = directory.kinds.get(PERSON, "directory")
    by_id: dict[str, list[tuple[str, str]]] = {}
    problems: list[str] = []
    for dn, user in directory.users.items():
        if (problem := name_problem("user id", user)) is not None:
            problems.append(f"{dn}: {problem}; skipped")
        elif user.startswith("user:"):
            problems.append(f"{dn}: user id {user!r} begins with 'user:'; skipped")
        else:
            by_id.setdefault(compared(kind, user), []).append((dn, user))
    users: dict[str, str] = {}
    for held in by_id.values():
        if len(held) == 1:
            ((dn, user),) = held
            users[dn] = user
        else:
            named = "; ".join(f"{dn} ({user!r})" for dn, user in sorted(held)[:4])
            problems.append(
                f"user id {held[0][1]!r} is held by {len(held)} entries as the directory "
                f"compares ids ({kind}): {named}: refused for each, none gets a role from the "
                "directory. Keep ids unique or sync with another users.id_attribute"
            )
    return users, problems


def checked_groups(
    directory: Directory, roles: RoleMapping
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The roles each group gives (group DN → roles), and why a group gives none of a role
    it would: its name cannot be a role (white space at an end, a control character, too
    long, ``user:…``, ``anyone``). Refused one group at a time, never the whole sync."""
    given: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for dn, name in directory.groups.items():
        if dn in directory.sid_only:
            continue  # (read for its SID: the SID role is its members' through wanted_grants)
        kept: list[str] = []
        for role in roles.roles_of(dn, name):
            try:
                kept.append(checked_role(f"group {name!r} ({dn})", role))
            except PolicyError as exc:
                problems.append(f"{exc}: that group gives no role {role!r}; rename it or map it")
        if kept:
            given[dn] = tuple(kept)
    return given, problems


def wanted_grants(
    directory: Directory,
    roles: RoleMapping,
    tenant: str,
    users: dict[str, str] | None = None,
    given: dict[str, tuple[str, ...]] | None = None,
) -> set[tuple[str, ...]]:
    """The ``g`` lines the directory says should be: each user × each role their groups give
    (``users``: the checked ones; all of the directory's by default; ``given``: the checked
    roles of each group, ``checked_groups``)."""
    if given is None:
        given, _ = checked_groups(directory, roles)
    grants: set[tuple[str, ...]] = set()
    for dn, user in (directory.users if users is None else users).items():
        subject = user_subject(user)
        for group in directory.groups_of(dn):
            for role in given.get(group, ()):
                grants.add((subject, role, tenant))
    return grants


def wanted_sids(
    directory: Directory, users: dict[str, str] | None = None
) -> dict[str, frozenset[str]]:
    """Each person's SIDs (subject → ``S-1-…``): their own, and every group's they are in,
    transitively (Active Directory; empty for a directory without SIDs). Kept one row a
    person (``retrieval_svc.acl.directory_sids``), never as policy lines."""
    sids = directory.sids
    if not sids:
        return {}
    held: dict[str, frozenset[str]] = {}
    for dn, user in (directory.users if users is None else users).items():
        mine = {sids[g] for g in directory.groups_of(dn) if g in sids}
        if dn in sids:
            mine.add(sids[dn])
        if mine:
            held[user_subject(user)] = frozenset(mine)
    return held


@dataclass(frozen=True, slots=True)
class Plan:
    """The changes a sync would make, and what it read."""

    changes: list[Change]
    users: int
    groups: int
    grants: int  # the directory's grants after the sync
    owned: frozenset[str] = frozenset()  # the roles the directory gives today
    skipped: tuple[str, ...] = ()  # entries that give no grant, and why
    identities: frozenset[Alias] = frozenset()  # every person read, by each id they have
    sids: dict[str, frozenset[str]] = field(default_factory=dict)  # subject → their SIDs
    known_sids: frozenset[str] = frozenset()  # every SID read (people's and groups')

    @property
    def added(self) -> int:
        return sum(c.op == "add" for c in self.changes)

    @property
    def removed(self) -> int:
        return len(self.changes) - self.added


def plan(
    directory: Directory,
    roles: RoleMapping,
    tenant: str,
    current: Iterable[tuple[str, ...]],
    *,
    owned_before: Iterable[str] = (),
    limits: Limits | None = None,
    source: str = "ldap",
    held: Iterable[tuple[str, ...]] = (),
    sids_before: Iterable[str] = (),
) -> Plan:
    """The difference between the grants this sync decides — ``held``, the grants it gave
    before (``grant_sources``), and those of ``current`` of the roles the directory owns,
    today's and ``owned_before`` — and what the directory says. The caller leaves another
    directory's grants out of ``current``: two syncs mapping one role each keep their own
    members; a role that inherits an owned role stops inheriting it. Raises ``RemovalLimit``
    past ``limits``: a directory that answered with half its people is more likely broken
    than emptied. A person's SIDs count as one grant there (``sids_before``: the people the
    sync gave SIDs before); a ``sid:`` policy line of before SIDs were kept per person is
    removed without counting (it moves, it is not taken away)."""
    limits = limits or Limits()
    current = [tuple(g) for g in current]  # (read twice)
    given, refused = checked_groups(directory, roles)
    today = roles.owned(directory)
    owned = today | set(owned_before)
    now = {
        tuple(g)
        for g in current
        if len(g) == 3
        and g[2] == tenant
        and g[0].startswith("user:")
        and (g[1] in owned or g[1].startswith(SID_PREFIX))
    }  # (a ``sid:`` line is an earlier version's way of keeping SIDs: only a sync gave one)
    mine = {tuple(g) for g in held if len(g) == 3 and g[2] == tenant}
    now |= mine
    users, skipped = checked_users(directory)
    skipped += refused
    skipped += [
        f"foreign security principal {sid} (in {', '.join(held[:4])}): not in this directory; "
        "nobody holds a group through it, and who holds those groups cannot be told (a share's "
        "deny naming one refuses every person)"
        for sid, held in sorted(directory.foreign.items())
    ]
    wanted = wanted_grants(directory, roles, tenant, users, given)
    sids = wanted_sids(directory, users)
    removed = sorted(now - wanted)
    counted = sum(not g[1].startswith(SID_PREFIX) for g in removed)
    had = set(sids_before)
    counted += len(had - sids.keys())  # (people who held SIDs and hold none now)
    if counted and not limits.force:
        named = sum(not g[1].startswith(SID_PREFIX) for g in now)
        _check_limits(counted, named + len(had), len(directory.users), limits)
    changes = [Change("remove", "g", g) for g in removed]
    # (a line it wants that a hand or SCIM gave before the sync owned its role is recorded as
    # the sync's too: another directory sharing the role would otherwise take it back)
    changes += [Change("add", "g", g) for g in sorted(wanted - mine)]
    # A role inheriting an owned role would give it to people in none of its groups: made
    # before the sync owned the role (after, the owner model refuses it), it goes.
    changes += [Change("remove", "g", g) for g in sorted(_inheriting(current, tenant, owned))]
    known: set[Alias] = set()
    for dn, user in users.items():
        ids = directory.aliases.get(dn, {})
        kinds = {a: directory.kinds.get(a, "directory") for a in (PERSON, *ids)}
        rows, problems = entries_of(tenant, source, user, ids, kinds)
        known |= rows
        skipped += [f"{dn}: {problem}" for problem in problems]
    for user, ids in directory.refused.values():  # (each of their ids is no one)
        kinds = {a: directory.kinds.get(a, "directory") for a in (PERSON, *ids)}
        rows, _ = entries_of(tenant, source, user, ids, kinds)
        known |= {replace(r, attribute=DISABLED + r.attribute) for r in rows}
    return Plan(
        changes,
        len(directory.users),
        len(directory.groups),
        len(wanted),
        frozenset(today),
        tuple(skipped),
        frozenset(known),
        sids,
        # (a group whose members were not all read is not known: acl.known_sids)
        frozenset({*directory.sids.values(), *directory.unheld_sids} - directory.partial_sids),
    )


def _inheriting(
    current: Iterable[tuple[str, ...]], tenant: str, owned: set[str]
) -> set[tuple[str, ...]]:
    """The role-inheritance lines of ``current`` whose parent is an owned role."""
    return {
        tuple(g)
        for g in current
        if len(g) == 3 and g[2] == tenant and not g[0].startswith("user:") and g[1] in owned
    }


def _check_limits(removed: int, now: int, users: int, limits: Limits) -> None:
    if users == 0:
        raise RemovalLimit(
            f"the directory answered with no users: removing all {removed} grants is refused "
            "(check users.base and users.filter); nothing changed. If everyone really left, "
            "sync with --force",
            "empty",
        )
    share = removed / now
    if removed > limits.removal_floor and share > limits.max_removed_share:
        raise RemovalLimit(
            f"the directory would remove {removed} of {now} grants ({share:.0%}, over the "
            f"limit of {limits.max_removed_share:.0%}; up to {limits.removal_floor} may always "
            "go): nothing changed. If people really left, sync with --force or a higher "
            "--max-removed-share",
            "share",
        )
