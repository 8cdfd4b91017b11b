"""From a directory's people and groups to a tenant's role grants (issue #35 §3), whoever read
them (LDAP today): nested groups expanded, groups mapped to roles, the difference with the
policy computed. Pure: no I/O.

The roles a mapping names are **owned by the directory** in that tenant: after a sync, the
users holding them are exactly the members of the groups that give them, so a member removed
from a group loses the role, and a grant of such a role made by hand is removed too. Roles the
mapping does not name are never touched.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from retrieval_svc.acl.admin import checked_role
from retrieval_svc.acl.history import Change
from retrieval_svc.acl.policy_store import PolicyError, user_subject


class DirectoryError(ValueError):
    """The directory cannot be synced; nothing was changed."""


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
        """The roles the directory decides (every role a mapped group can give)."""
        roles = {role for given in self.by_group.values() for role in given}
        if self.all_groups:
            roles |= set(directory.groups.values())
        return roles


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


def wanted_grants(directory: Directory, roles: RoleMapping, tenant: str) -> set[tuple[str, ...]]:
    """The ``g`` lines the directory says should be: each user × each role their groups give."""
    given: dict[str, tuple[str, ...]] = {}
    for dn, name in directory.groups.items():
        found = roles.roles_of(dn, name)
        for role in found:
            try:
                checked_role(f"group {name!r} ({dn})", role)
            except PolicyError as exc:
                raise DirectoryError(f"{exc}: rename the group or map it to a role") from None
        if found:
            given[dn] = found
    grants: set[tuple[str, ...]] = set()
    for dn, user in directory.users.items():
        for group in directory.groups_of(dn):
            for role in given.get(group, ()):
                grants.add((user_subject(user), role, tenant))
    return grants


@dataclass(frozen=True, slots=True)
class Plan:
    """The changes a sync would make, and what it read."""

    changes: list[Change]
    users: int
    groups: int
    grants: int  # the directory's grants after the sync

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
    max_removed_share: float = 0.5,
) -> Plan:
    """The difference between the tenant's grants of the directory's roles and what the
    directory says. Refuses (``DirectoryError``) to remove more than ``max_removed_share`` of
    them at once: a directory that answered with half its people is more likely broken than
    emptied (raise the share, or sync with ``--max-removed-share 1``, when it really was)."""
    owned = roles.owned(directory)
    now = {
        tuple(g)
        for g in current
        if len(g) == 3 and g[2] == tenant and g[0].startswith("user:") and g[1] in owned
    }
    wanted = wanted_grants(directory, roles, tenant)
    removed = sorted(now - wanted)
    if now and len(removed) > max_removed_share * len(now) and len(removed) > 10:
        raise DirectoryError(
            f"the directory would remove {len(removed)} of {len(now)} grants "
            f"({len(removed) / len(now):.0%}, over the limit of {max_removed_share:.0%}): "
            "nothing changed. If people really left, sync with a higher --max-removed-share"
        )
    changes = [Change("remove", "g", g) for g in removed]
    changes += [Change("add", "g", g) for g in sorted(wanted - now)]
    return Plan(changes, len(directory.users), len(directory.groups), len(wanted))
