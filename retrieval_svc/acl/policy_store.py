"""Where the Casbin policy lives, how it is read, and how it is administered.

Two stores, one shape: ``PolicyFiles`` (a CSV file, hand-edited or from a ConfigMap) and
``PolicyDatabase`` (pycasbin's SQLAlchemy adapter: SQLite for one machine, PostgreSQL for
production). Both are small picklable values, so the policy watcher can hand one to a child
process to load; both answer a cheap ``stamp`` that changes when the policy does.
Changing a database policy is ``retrieval_svc.acl.admin``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_svc.acl import history
from retrieval_svc.key_entry import ANYONE, USER_PREFIX
from retrieval_svc.settings import DEFAULT_MODEL, DEFAULT_POLICY
from retrieval_svc.tenancy import EVERY_TENANT, check_tenant

__all__ = [
    "ANYONE",  # ANYONE, USER_PREFIX and the DEFAULT_* paths are defined in settings (the ground
    "DEFAULT_MODEL",  # floor, where API keys are validated) and re-exported for the acl package
    "DEFAULT_POLICY",
    "READ",
    "USER_PREFIX",
    "PolicyDatabase",
    "PolicyError",
    "PolicyFiles",
    "PolicySource",
    "Rule",
    "load_enforcer",
    "user_subject",
    "validate_rules",
]

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

# pycasbin, SQLAlchemy and the adapter are imported where used: Settings import this module's
# paths, and importing Settings must not load them.

READ = "read"
TABLE = "casbin_rule"  # the SQLAlchemy adapter's table
MAX_NAME = 255  # the adapter's column width

Rule = tuple[str, ...]


class PolicyError(ValueError):
    """A model or policy that cannot be used."""


def user_subject(user_id: str) -> str:
    """The Casbin subject of a user (kept apart from role names)."""
    return USER_PREFIX + user_id


def policy_tenant(value: str, *, every: bool) -> str:
    """``value`` as a policy line's tenant: a tenant's plain name, or (``every``: a ``p``
    line) ``*`` alone for every tenant; raises PolicyError. Never a pattern: ``acme*`` would
    otherwise match a tenant named ``acme`` (issue #36 §2)."""
    if every and value == EVERY_TENANT:
        return value
    try:
        return check_tenant(value)
    except ValueError as exc:
        also = " ('*' alone means every tenant)" if every else ""
        raise PolicyError(f"{exc}; tenants match exactly{also}") from None


def validate_rules(policy: Iterable[Rule], grouping: Iterable[Rule]) -> None:
    """Raise PolicyError for a line the model cannot mean."""
    for rule in policy:
        if len(rule) != 4 or not all(rule):
            raise PolicyError(f"policy line {rule} must be: p, subject, tenant, knowledge_id, read")
        if rule[3] != READ:
            raise PolicyError(f"policy line {rule}: the only action is 'read'")
        _in_line(rule, rule[1], every=True)
    for rule in grouping:
        if len(rule) != 3 or not all(rule):
            raise PolicyError(f"role line {rule} must be: g, member, role, tenant")
        if rule[1].startswith(USER_PREFIX):
            raise PolicyError(f"role line {rule}: a user cannot be a role")
        if ANYONE in rule[:2]:
            raise PolicyError(f"role line {rule}: 'anyone' is every principal, never a role")
        _in_line(rule, rule[2], every=False)


def _in_line(rule: Rule, tenant: str, *, every: bool) -> None:
    try:
        policy_tenant(tenant, every=every)
    except PolicyError as exc:
        raise PolicyError(f"{'policy' if every else 'role'} line {rule}: {exc}") from None


def _rules(enforcer: Any) -> tuple[list[Rule], list[Rule]]:
    policy, grouping = enforcer.get_policy(), enforcer.get_grouping_policy()
    validate_rules(policy, grouping)
    return policy, grouping


def load_enforcer(model: Path, policy: Path) -> Any:
    """A validated ``casbin.Enforcer`` from files; raises PolicyError."""
    import casbin

    for path in (model, policy):
        if not path.is_file():
            raise PolicyError(f"{path} does not exist")
    try:
        enforcer = casbin.Enforcer(str(model), str(policy))
    except Exception as exc:  # pycasbin raises assorted errors for bad files
        raise PolicyError(f"cannot load {model.name} / {policy.name}: {exc}") from exc
    _rules(enforcer)
    return enforcer


@dataclass(frozen=True, slots=True)
class PolicyFiles:
    """A Casbin model and a CSV policy file."""

    model: Path
    policy: Path

    def stamp(self) -> tuple[tuple[int, int], ...]:
        """Cheap change detection: modification time and size of both files."""
        stamps = []
        for path in (self.model, self.policy):
            try:
                st = path.stat()
                stamps.append((st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((-1, -1))
        return tuple(stamps)

    def rules(self) -> tuple[list[Rule], list[Rule]]:
        """The validated ``p`` and ``g`` lines; raises PolicyError."""
        return _rules(load_enforcer(self.model, self.policy))

    def describe(self) -> str:
        return str(self.policy)


@functools.cache
def _engine(url: str) -> Engine:
    """One engine (connection pool) per database URL and process."""
    import sqlalchemy

    return sqlalchemy.create_engine(url, pool_pre_ping=True)


@dataclass(frozen=True, slots=True)
class PolicyDatabase:
    """A Casbin model and a policy in a database (``RSVC_CASBIN_DB_URL``, a SQLAlchemy URL:
    ``sqlite:///policy.db``, ``postgresql+psycopg://user:pass@host/db``)."""

    model: Path
    url: str

    def describe(self) -> str:
        """The URL without its password (safe to log)."""
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except Exception:  # (an unreadable URL must not turn an error message into another)
            return "(a database URL SQLAlchemy cannot read)"

    def _failure(self, exc: Exception) -> PolicyError:
        return PolicyError(f"policy database {self.describe()}: {type(exc).__name__}: {exc}"[:500])

    def adapter(self) -> Any:
        """pycasbin's SQLAlchemy adapter on this database (creates the table if missing)."""
        from sqlalchemy_adapter import Adapter  # type: ignore[import-untyped]

        try:
            return Adapter(_engine(self.url), table_name=TABLE)
        except Exception as exc:  # unreachable server, bad credentials, bad URL
            raise self._failure(exc) from exc

    def enforcer(self) -> Any:
        """A ``casbin.Enforcer`` loaded from the database; raises PolicyError."""
        import casbin

        if not self.model.is_file():
            raise PolicyError(f"{self.model} does not exist")
        adapter = self.adapter()
        try:
            return casbin.Enforcer(str(self.model), adapter)
        except Exception as exc:
            raise self._failure(exc) from exc

    def stamp(self) -> tuple[Any, ...]:
        """Cheap change detection in one query: row count, highest id and total length of
        the rules (an added, removed or edited rule changes at least one). Raises
        PolicyError when the database cannot be reached."""
        import sqlalchemy

        lengths = " + ".join(
            f"LENGTH(COALESCE({c}, ''))" for c in ("ptype", "v0", "v1", "v2", "v3", "v4", "v5")
        )
        query = sqlalchemy.text(f"SELECT COUNT(*), MAX(id), SUM({lengths}) FROM {TABLE}")
        try:
            with _engine(self.url).connect() as conn:
                row = conn.execute(query).one()
        except Exception as exc:
            raise self._failure(exc) from exc
        model = self.model.stat()
        return (model.st_mtime_ns, *row)

    def rules(self) -> tuple[list[Rule], list[Rule]]:
        """The validated ``p`` and ``g`` lines; raises PolicyError."""
        return _rules(self.enforcer())

    def engine(self) -> Engine:
        """The database's connection pool (one per URL and process)."""
        return _engine(self.url)

    def history(
        self,
        *,
        since: datetime,
        tenant: str | None = None,
        subject: str | None = None,
        limit: int = 100,
        with_changes: int = 1000,
    ) -> list[history.Event]:
        """Recorded changes since ``since``, newest first (``history.recent``); raises
        PolicyError when the database cannot be read."""
        try:
            engine = _engine(self.url)
            history.ensure_tables(engine, TABLE)
            return history.recent(
                engine,
                TABLE,
                since=since,
                tenant=tenant,
                subject=subject,
                limit=limit,
                with_changes=with_changes,
            )
        except Exception as exc:
            raise self._failure(exc) from exc


PolicySource = PolicyFiles | PolicyDatabase
