"""Changing a policy database (``retrieval-svc policy``, the console, ``sync-ldap``, SCIM):
every name checked as the policy can mean it, every change idempotent and recorded with its
actor in the same transaction (``retrieval_svc.acl.history``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_svc.acl import directory_sids, grant_sources, history, identities, owned, tables
from retrieval_svc.acl.changes import Change
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.id_forms import MAX_COMPARED, compared
from retrieval_svc.acl.identities import Alias
from retrieval_svc.acl.policy_store import (
    ANYONE,
    READ,
    TABLE,
    USER_PREFIX,
    PolicyDatabase,
    PolicyError,
    PolicyRead,
    Skipped,
    csv_line,
    policy_tenant,
    read_csv,
    user_subject,
)
from retrieval_svc.key_entry import SID_PREFIX, reserved_prefix
from retrieval_svc.names import name_problem

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


def _os_user() -> str:
    """Who runs the CLI, as the history names them."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # (no passwd entry in a container)
        return str(os.getuid())


CLI = Actor(f"cli:{_os_user()}", "cli")  # the CLI's changes, unless a caller says who


def _name(what: str, value: str) -> str:
    """``value`` as a stored name (``retrieval_svc.names``: the one check); PolicyError."""
    if (problem := name_problem(what, value)) is not None:
        raise PolicyError(problem)
    return value


def _tenant(value: str, *, every: bool = False) -> str:
    return policy_tenant(_name("tenant", value), every=every)


def _role(what: str, value: str) -> str:
    value = _name(what, value)
    prefix = reserved_prefix(value)  # (fullwidth spellings folded: one rule)
    if prefix == USER_PREFIX:
        raise PolicyError(f"{what} {value!r} is a user, not a role (user: names users)")
    if value == ANYONE:
        raise PolicyError(f"{what} {value!r} is every principal, not a role to hold or inherit")
    if prefix == SID_PREFIX:
        raise PolicyError(
            f"{what} {value!r} names a Windows SID: only an Active Directory sync gives it"
        )
    return value


def checked_role(what: str, value: str) -> str:
    """``value`` as a role name a principal can hold; raises PolicyError (a user's name,
    ``anyone``, or a name no store can hold: ``retrieval_svc.names``)."""
    return _role(what, value)


def checked_user(value: str) -> str:
    """``value`` as a user id the policy can name (``user:<id>``); raises PolicyError."""
    return _user(value)


def _user(value: str) -> str:
    value = _name("user id", value)
    if value.startswith(USER_PREFIX):
        raise PolicyError(
            f"give the user id without {USER_PREFIX!r} (the policy adds it): "
            f"{value.removeprefix(USER_PREFIX)!r}"
        )
    return value


def _subject(value: str) -> str:
    value = _name("subject", value)
    if value.startswith(USER_PREFIX):
        _user(value.removeprefix(USER_PREFIX))
    return value


def _grant(subject: str, knowledge_ids: str, tenant: str) -> list[str]:
    return [_subject(subject), _tenant(tenant, every=True), _name("knowledge ids", knowledge_ids)]


class PolicyAdmin:
    """Changes to a policy database, each recorded with its ``actor`` in the same transaction
    (``retrieval_svc.acl.history``); each returns whether anything changed (idempotent: what
    was already so is neither changed nor recorded)."""

    def __init__(self, store: PolicyDatabase, actor: Actor = CLI) -> None:
        self.store = store
        self.actor = actor
        store.ensure()
        try:
            owned.ensure_table(store.engine())
        except Exception as exc:
            raise store._failure(exc) from exc

    def apply(
        self,
        action: str,
        changes: list[Change],
        detail: str = "",
        *,
        also: Callable[[Connection], None] | None = None,
        first: Callable[[Connection], None] | None = None,
        strict: bool = False,
    ) -> bool:
        """Apply ``changes`` through the owner model (``owners.judge``) and record them as
        ``action``, in one transaction (with ``first`` and ``also``, further writes before and
        after them that commit or fail with them; ``strict``: a removal another source's grant
        survives refuses everything)."""
        try:
            with self.store.engine().begin() as conn:
                if first is not None:
                    first(conn)
                events = history.apply_in(
                    conn, TABLE, self.actor, action, changes, detail=detail, strict=strict
                )
                if also is not None:
                    also(conn)
        except PolicyError:
            raise
        except Exception as exc:  # the database refused: nothing changed, nothing recorded
            raise self.store._failure(exc) from exc
        return bool(events)

    def grant_role(self, user: str, role: str, tenant: str) -> bool:
        """``user`` holds ``role`` in ``tenant``; refused for a role a directory sync owns
        (``owners``: its next run would take the grant away)."""
        rule = (user_subject(_user(user)), _role("role", role), _tenant(tenant))
        return self.apply("grant-role", [Change("add", "g", rule)])

    def sync(
        self,
        action: str,
        tenant: str,
        owner: str,
        changes: list[Change],
        owns: Iterable[str],
        detail: str,
        people: Iterable[Alias] = (),
        renamed_from: Iterable[str] = (),
        sids: Mapping[str, Iterable[str]] | None = None,
        known_sids: Iterable[str] = (),
    ) -> tuple[int, int]:
        """Apply a directory sync's ``changes``, record that ``owner`` now owns ``owns`` in
        ``tenant``, and make the people it read (by each of their ids) the ones it knows, in
        one transaction — first taking over what the sync gave and owned under each name it
        was ``renamed_from``; with ``sids`` (subject → SIDs), each person's SIDs and every SID
        it read (``known_sids``) are the sync's rows of ``directory_sids``. The aliases added
        and removed."""
        roles, known, old = list(owns), list(people), list(renamed_from)
        counts = [(0, 0)]

        def first(conn: Connection) -> None:
            for name in old:
                grant_sources.rename_in(conn, tenant, f"ldap:{name}", f"ldap:{owner}")
                owned.rename_in(conn, tenant, name, owner)
                identities.replace_in(conn, tenant, f"ldap:{name}", [])
                directory_sids.rename_in(conn, tenant, f"ldap:{name}", f"ldap:{owner}")

        def also(conn: Connection) -> None:
            owned.replace_in(conn, tenant, owner, roles)
            owned.ran_in(conn, tenant, owner, old)
            counts[0] = identities.replace_in(conn, tenant, f"ldap:{owner}", known)
            if sids is not None:
                directory_sids.replace_in(conn, tenant, f"ldap:{owner}", sids, known_sids)

        self.apply(action, changes, detail, also=also, first=first)
        return counts[0]

    def owned_roles(self, tenant: str, owner: str | None = None) -> dict[str, str]:
        """The roles directory syncs own in ``tenant`` (role → owner)."""
        try:
            with self.store.engine().connect() as conn:
                return owned.owned_in(conn, _tenant(tenant), owner)
        except PolicyError:
            raise
        except Exception as exc:
            raise self.store._failure(exc) from exc

    def replace_map(
        self, tenant: str, lines: list[tuple[int, str, str]], origin: str
    ) -> tuple[int, int]:
        """Make the tenant's explicit identity map exactly ``lines`` ((line number, id, the
        person's directory id)), recorded in the history with every change; the rows added
        and removed. Every line is checked first — an empty, too long or repeated id, an
        empty or unusable person — and any problem changes nothing (PolicyError naming every
        line, as an editor numbers them)."""
        tenant = _tenant(tenant)
        rows: set[Alias] = set()
        problems: list[str] = []
        first: dict[str, int] = {}
        for number, alias, person in lines:
            try:
                mapped = compared("exact", _name("id", alias))
                if len(mapped) > MAX_COMPARED:
                    raise PolicyError(f"id is {len(mapped)} characters, over {MAX_COMPARED}")
                if mapped in first:
                    raise PolicyError(f"id {alias!r} is mapped on line {first[mapped]} too")
                first[mapped] = number
                rows.add(Alias(tenant, mapped, _user(person), "map", "map", "exact"))
            except PolicyError as exc:
                problems.append(f"{origin} line {number}: {exc}")
        if problems:
            more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
            raise PolicyError("; ".join(problems[:20]) + more)
        try:
            with self.store.engine().begin() as conn:
                before = {(a, p) for a, p in identities.map_of(conn, tenant)}
                added, removed = identities.replace_in(conn, tenant, "map", rows)
                if added or removed:
                    after = {(r.alias, r.person) for r in rows}
                    shown = [f"+ {a} → {p}" for a, p in sorted(after - before)]
                    shown += [f"- {a} → {p}" for a, p in sorted(before - after)]
                    detail = f"identity map from {origin}: +{added} -{removed}: " + "; ".join(shown)
                    history.record_in(
                        conn, TABLE, self.actor, "identity-map", tenant, [], detail=detail
                    )
        except PolicyError:
            raise
        except Exception as exc:
            raise self.store._failure(exc) from exc
        return added, removed

    def record(self, tenant: str, action: str, detail: str) -> None:
        """Record an event without policy lines: a sync stopped by a limit (what stopped it),
        a rules file that moved documents' roles, an identity map's changes."""
        try:
            with self.store.engine().begin() as conn:
                history.record_in(conn, TABLE, self.actor, action, tenant, [], detail=detail)
        except Exception as exc:
            raise self.store._failure(exc) from exc

    def revoke_role(self, user: str, role: str, tenant: str) -> bool:
        """``user`` no longer holds ``role`` in ``tenant`` by hand. A grant another source
        gives (a directory sync, a SCIM key) is that source's to take back: PolicyError naming
        it (the hand grant, if there was one too, is gone)."""
        rule = (user_subject(_user(user)), _role("role", role), _tenant(tenant))
        changed = self.apply("revoke-role", [Change("remove", "g", rule)])
        others = self.givers(rule) - {grant_sources.HAND}
        if others:
            from retrieval_svc.acl.owners import kept_message

            done = "owner_hand_gone" if changed else "owner_nothing_changed"
            raise PolicyError(kept_message(rule, others, done))
        return changed

    def givers(self, rule: tuple[str, str, str]) -> set[str]:
        """The sources that give the grant ``rule`` (member, role, tenant)."""
        try:
            with self.store.engine().connect() as conn:
                return grant_sources.givers_in(conn, [rule]).get(rule, set())
        except Exception as exc:
            raise self.store._failure(exc) from exc

    def sourced(self, tenant: str) -> dict[tuple[str, ...], set[str]]:
        """Every grant of ``tenant`` some source gives, with its sources (the others were
        made before grants knew their source)."""
        try:
            with self.store.engine().connect() as conn:
                return grant_sources.sourced_in(conn, _tenant(tenant))
        except Exception as exc:
            raise self.store._failure(exc) from exc

    def inherit(self, role: str, parent: str, tenant: str) -> bool:
        """Holders of ``role`` also hold ``parent`` in ``tenant``."""
        role, parent = _role("role", role), _role("parent role", parent)
        if role == parent:
            raise PolicyError(f"role {role!r} cannot inherit itself")
        rule = (role, parent, _tenant(tenant))
        return self.apply("inherit", [Change("add", "g", rule)])

    def disinherit(self, role: str, parent: str, tenant: str) -> bool:
        """Undo ``inherit``."""
        rule = (_role("role", role), _role("parent role", parent), _tenant(tenant))
        return self.apply("disinherit", [Change("remove", "g", rule)])

    def allow(self, subject: str, knowledge_ids: str, tenant: str) -> bool:
        """``subject`` (a role, ``user:<id>`` or ``anyone``) may read the knowledge bases
        matching ``knowledge_ids`` (a keyMatch pattern) in ``tenant`` (a name, or ``*`` alone:
        every tenant)."""
        rule = (*_grant(subject, knowledge_ids, tenant), READ)
        return self.apply("allow", [Change("add", "p", rule)])

    def disallow(self, subject: str, knowledge_ids: str, tenant: str) -> bool:
        """Undo ``allow``."""
        rule = (*_grant(subject, knowledge_ids, tenant), READ)
        return self.apply("disallow", [Change("remove", "p", rule)])

    def read(self) -> PolicyRead:
        """The policy as the service reads it: its lines, and those it skips."""
        return self.store.rules()

    def rules(self, tenant: str | None = None) -> list[tuple[str, ...]]:
        """Every rule in force as a row (``p, …`` then ``g, …``), optionally of one tenant."""
        if tenant is not None:
            _tenant(tenant, every=True)
        read = self.read()
        rows = [("p", *r) for r in read.policy if tenant is None or r[1] == tenant]
        rows += [("g", *r) for r in read.grouping if tenant is None or r[2] == tenant]
        return rows

    def check(self) -> list[Skipped]:
        """The stored lines the service skips (each a grant not given), with their row ids."""
        return self.read().skipped

    def delete_row(self, row_id: int) -> tuple[str, tuple[str, ...]] | None:
        """Delete the stored line ``row_id`` whatever it holds (one ``check`` lists, or one no
        other command can name), recorded as ``delete``; what it held, or None. A grant
        another source gives (a directory sync, a SCIM key) is refused as ``revoke_role``
        refuses it, naming the source (``owners``); the hand's record of what it deletes goes
        with it."""
        from retrieval_svc.acl import owners

        try:
            with self.store.engine().begin() as conn:
                found = tables.delete_row(conn, TABLE, row_id)
                if found is None:
                    return None
                ptype, values = found
                shown = tuple("" if v is None else str(v) for v in values)
                change = Change("remove", str(ptype), shown)
                ruling = owners.judge(conn, grant_sources.HAND, [change], strict=True)
                owners.record_in(conn, grant_sources.HAND, ruling)
                history.record_in(
                    conn,
                    TABLE,
                    self.actor,
                    "delete",
                    change.tenant[:255],
                    [change],
                    detail=f"row {row_id}",
                )
        except PolicyError:
            raise
        except Exception as exc:
            raise self.store._failure(exc) from exc
        return str(ptype), shown

    def export_csv(self) -> str:
        """The whole policy in Casbin's CSV format, values quoted where they need it
        (``import`` reads it back verbatim)."""
        return "".join(csv_line(row[0], row[1:]) + "\n" for row in self.rules())

    def import_csv(self, path: Path) -> int:
        """Replace the whole policy by a CSV policy file, in one transaction, after
        validating every line (one that means nothing refuses the import, naming its line).
        Its grants pass the owner model as the hand's (``owners``): a grant or an inheritance
        of a role a directory sync owns, or dropping a line another source gives, refuses the
        import naming the owner. Returns the number of rules."""
        new = PolicyRead()  # (each line checked as the service reads it)
        for number, (ptype, *values) in read_csv(path):
            new.add(f"{path.name} line {number}", ptype, tuple(values))
        if new.skipped:
            first = new.skipped[0]
            raise PolicyError(f"{first.where}: {first.reason}")
        old = self.read()
        changes = history.diff([tuple(r) for r in old.policy], new.policy, "p")
        changes += history.diff([tuple(r) for r in old.grouping], new.grouping, "g")
        self.apply("import", changes, detail=f"from {path.name}", strict=True)
        read = self.read()
        return len(read.policy) + len(read.grouping)
