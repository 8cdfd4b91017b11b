"""Changing a policy database (``retrieval-svc policy``, the console, ``sync-ldap``, SCIM):
every name checked as the policy can mean it, every change idempotent and recorded with its
actor in the same transaction (``retrieval_svc.acl.history``)."""

from __future__ import annotations

import os
from pathlib import Path

from retrieval_svc.acl import history
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import (
    ANYONE,
    MAX_NAME,
    READ,
    TABLE,
    USER_PREFIX,
    PolicyDatabase,
    PolicyError,
    _rules,
    load_enforcer,
    policy_tenant,
    user_subject,
)


def _os_user() -> str:
    """Who runs the CLI, as the history names them."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # (no passwd entry in a container)
        return str(os.getuid())


CLI = Actor(f"cli:{_os_user()}", "cli")  # the CLI's changes, unless a caller says who


def _name(what: str, value: str) -> str:
    value = value.strip()
    if not value:
        raise PolicyError(f"{what} is empty")
    if len(value) > MAX_NAME:
        raise PolicyError(f"{what} is longer than {MAX_NAME} characters")
    if any(c in value for c in ',\n\r"'):
        raise PolicyError(f"{what} {value!r} may not contain commas, quotes or line breaks")
    return value


def _tenant(value: str, *, every: bool = False) -> str:
    return policy_tenant(_name("tenant", value), every=every)


def _role(what: str, value: str) -> str:
    value = _name(what, value)
    if value.startswith(USER_PREFIX):
        raise PolicyError(f"{what} {value!r} is a user, not a role (user: names users)")
    if value == ANYONE:
        raise PolicyError(f"{what} {value!r} is every principal, not a role to hold or inherit")
    return value


def checked_role(what: str, value: str) -> str:
    """``value`` as a role name a principal can hold; raises PolicyError (a user's name,
    ``anyone``, commas, quotes or line breaks, empty, too long)."""
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
        self._enforcer = store.enforcer()
        try:
            history.ensure_tables(store.engine(), TABLE)
        except Exception as exc:
            raise store._failure(exc) from exc

    def apply(self, action: str, changes: list[history.Change], detail: str = "") -> bool:
        """Apply ``changes`` and record them as ``action``, in one transaction."""
        try:
            events = history.apply(
                self.store.engine(), TABLE, self.actor, action, changes, detail=detail
            )
        except PolicyError:
            raise
        except Exception as exc:  # the database refused: nothing changed, nothing recorded
            raise self.store._failure(exc) from exc
        if events:
            self._enforcer.load_policy()
        return bool(events)

    def grant_role(self, user: str, role: str, tenant: str) -> bool:
        """``user`` holds ``role`` in ``tenant``."""
        rule = (user_subject(_user(user)), _role("role", role), _tenant(tenant))
        return self.apply("grant-role", [history.Change("add", "g", rule)])

    def revoke_role(self, user: str, role: str, tenant: str) -> bool:
        """``user`` no longer holds ``role`` in ``tenant``."""
        rule = (user_subject(_user(user)), _role("role", role), _tenant(tenant))
        return self.apply("revoke-role", [history.Change("remove", "g", rule)])

    def inherit(self, role: str, parent: str, tenant: str) -> bool:
        """Holders of ``role`` also hold ``parent`` in ``tenant``."""
        role, parent = _role("role", role), _role("parent role", parent)
        if role == parent:
            raise PolicyError(f"role {role!r} cannot inherit itself")
        rule = (role, parent, _tenant(tenant))
        return self.apply("inherit", [history.Change("add", "g", rule)])

    def disinherit(self, role: str, parent: str, tenant: str) -> bool:
        """Undo ``inherit``."""
        rule = (_role("role", role), _role("parent role", parent), _tenant(tenant))
        return self.apply("disinherit", [history.Change("remove", "g", rule)])

    def allow(self, subject: str, knowledge_ids: str, tenant: str) -> bool:
        """``subject`` (a role, ``user:<id>`` or ``anyone``) may read the knowledge bases
        matching ``knowledge_ids`` (a keyMatch pattern) in ``tenant`` (a name, or ``*`` alone:
        every tenant)."""
        rule = (*_grant(subject, knowledge_ids, tenant), READ)
        return self.apply("allow", [history.Change("add", "p", rule)])

    def disallow(self, subject: str, knowledge_ids: str, tenant: str) -> bool:
        """Undo ``allow``."""
        rule = (*_grant(subject, knowledge_ids, tenant), READ)
        return self.apply("disallow", [history.Change("remove", "p", rule)])

    def rules(self, tenant: str | None = None) -> list[tuple[str, ...]]:
        """Every rule as a CSV row (``p, …`` then ``g, …``), optionally of one tenant."""
        if tenant is not None:
            _tenant(tenant, every=True)
        policy, grouping = _rules(self._enforcer)
        rows = [("p", *r) for r in policy if tenant is None or r[1] == tenant]
        rows += [("g", *r) for r in grouping if tenant is None or r[2] == tenant]
        return rows

    def export_csv(self) -> str:
        """The whole policy in Casbin's CSV format (``import`` reads it back)."""
        return "".join(", ".join(row) + "\n" for row in self.rules())

    def import_csv(self, path: Path) -> int:
        """Replace the whole policy by a CSV policy file, in one transaction, after
        validating it. Returns the number of rules."""
        loaded = load_enforcer(self.store.model, path)
        for rule in (*loaded.get_policy(), *loaded.get_grouping_policy()):
            for value in rule:
                _name("value", value)
        old_p, old_g = _rules(self._enforcer)
        changes = history.diff(
            [tuple(r) for r in old_p], [tuple(r) for r in loaded.get_policy()], "p"
        )
        changes += history.diff(
            [tuple(r) for r in old_g], [tuple(r) for r in loaded.get_grouping_policy()], "g"
        )
        self.apply("import", changes, detail=f"from {path.name}")  # (one transaction)
        policy, grouping = _rules(self._enforcer)
        return len(policy) + len(grouping)
