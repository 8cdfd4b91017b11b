"""Where the Casbin policy lives, how it is read, and how it is administered.

Two stores, one shape: ``PolicyFiles`` (a CSV file, hand-edited or from a ConfigMap) and
``PolicyDatabase`` (the ``casbin_rule`` table pycasbin's SQLAlchemy adapter defines: SQLite for
one machine, PostgreSQL for production). Both are small picklable values, so the policy
watcher can hand one to a child process to load; both answer a cheap ``stamp`` that changes
when the policy does. Changing a database policy is ``retrieval_svc.acl.admin``'s.

Both are read here, field by field, never through pycasbin's line parser: that parser joins a
row's fields with ``", "`` and splits them again, treating ``( ) [ ]`` as nesting, so one
stored name such as ``x(`` made the whole policy unreadable, for every tenant. A CSV file is
read as CSV (quoted fields hold commas and quotes). Each line is checked on its own: a line
that cannot mean anything is skipped and reported (``PolicyRead.skipped``), never allowed to
take the other lines with it. Every line only grants, so a skipped line is a grant not given:
the policy fails closed.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_svc.acl import directory_sids, history, identities, tables
from retrieval_svc.acl.errors import PolicyError
from retrieval_svc.acl.identities import Alias
from retrieval_svc.causes import cause
from retrieval_svc.key_entry import ANYONE, USER_PREFIX
from retrieval_svc.names import MAX_NAME, name_problem
from retrieval_svc.settings import DEFAULT_MODEL, DEFAULT_POLICY
from retrieval_svc.tenancy import EVERY_TENANT, check_tenant

__all__ = [
    "ANYONE",  # ANYONE, USER_PREFIX and the DEFAULT_* paths are defined in settings (the ground
    "DEFAULT_MODEL",  # floor, where API keys are validated) and re-exported for the acl package
    "DEFAULT_POLICY",
    "MAX_NAME",
    "READ",
    "USER_PREFIX",
    "PolicyDatabase",
    "PolicyError",
    "PolicyFiles",
    "PolicyRead",
    "PolicySource",
    "Rule",
    "Skipped",
    "csv_line",
    "line_problem",
    "read_csv",
    "user_subject",
]

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

# pycasbin and SQLAlchemy are imported where used: Settings import this module's paths, and
# importing Settings must not load them.

READ = "read"
TABLE = "casbin_rule"  # the table pycasbin's SQLAlchemy adapter defines (and existing
# deployments have): id, ptype, v0 … v5

Rule = tuple[str, ...]


def user_subject(user_id: str) -> str:
    """The Casbin subject of a user (kept apart from role names)."""
    return USER_PREFIX + user_id


def policy_tenant(value: str, *, every: bool) -> str:
    """``value`` as a policy line's tenant: a tenant's plain name, or (``every``: a ``p``
    line) ``*`` alone for every tenant; raises PolicyError. Never a pattern: ``acme*`` would
    otherwise match a tenant named ``acme``."""
    if every and value == EVERY_TENANT:
        return value
    try:
        return check_tenant(value)
    except ValueError as exc:
        also = " ('*' alone means every tenant)" if every else ""
        raise PolicyError(f"{exc}; tenants match exactly{also}") from None


def _subject_problem(what: str, value: str) -> str | None:
    if value.startswith(USER_PREFIX):
        return name_problem(f"{what}'s user id", value.removeprefix(USER_PREFIX))
    return None


def line_problem(ptype: str, line: tuple[Any, ...]) -> str | None:
    """Why the policy line ``ptype, *line`` cannot mean anything, else None."""
    values: list[Any] = list(line)
    if ptype == "p":
        if len(values) != 4:
            return "a p line must be: p, subject, tenant, knowledge_id, read"
        labels: tuple[str, ...] = ("subject", "tenant", "knowledge ids", "action")
    elif ptype == "g":
        if len(values) != 3:
            return "a g line must be: g, member, role, tenant"
        labels = ("member", "role", "tenant")
    else:
        return f"unknown line type {ptype!r} (p or g)"
    for label, value in zip(labels, values, strict=True):
        if (problem := name_problem(label, value)) is not None:
            return problem
    if ptype == "p":
        if values[3] != READ:
            return "the only action is 'read'"
        tenant, every = values[1], True
        problem = _subject_problem("subject", values[0])
    else:
        if values[1].startswith(USER_PREFIX):
            return "a user cannot be a role"
        if ANYONE in values[:2]:
            return "'anyone' is every principal, never a role"
        tenant, every = values[2], False
        problem = _subject_problem("member", values[0])
    if problem is not None:
        return problem
    try:
        policy_tenant(tenant, every=every)
    except PolicyError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A stored line that was not read into the policy, and why (a grant not given)."""

    where: str  # "row 17" of the table, or "policy.csv line 4"
    ptype: str
    values: tuple[str | None, ...]
    reason: str
    row_id: int | None = None  # the table's id (``retrieval-svc policy delete`` takes it)

    def describe(self) -> str:
        shown = ", ".join(repr(v) for v in (self.ptype, *self.values))
        return f"{self.where}: [{shown}]: {self.reason}"[:600]


@dataclass(slots=True)
class PolicyRead:
    """The lines of a policy that mean something, and those skipped."""

    policy: list[Rule] = field(default_factory=list)
    grouping: list[Rule] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)  # every id each person is known by
    # Each person's SIDs from a directory sync (tenant, subject, ``directory_sids.encode``)
    sids: list[tuple[str, str, str]] = field(default_factory=list)

    def skipped_in(self, tenant: str) -> list[Skipped]:
        """The skipped lines that name ``tenant`` (where its tenant would be, or anywhere)."""
        return [s for s in self.skipped if tenant in s.values]

    def add(
        self, where: str, ptype: Any, values: tuple[Any, ...], row_id: int | None = None
    ) -> None:
        """Take one stored line: into the policy, or into ``skipped`` with its reason."""
        problem = (
            f"unknown line type {ptype!r} (p or g)"
            if not isinstance(ptype, str)
            else line_problem(ptype, values)
        )
        if problem is None:
            (self.policy if ptype == "p" else self.grouping).append(values)
        else:
            self.skipped.append(Skipped(where, str(ptype), values, problem, row_id))


def _cell(value: str) -> str:
    if value and value == value.strip() and not any(c in value for c in ',"#'):
        return value
    return '"' + value.replace('"', '""') + '"'


def csv_line(ptype: str, values: Iterable[str]) -> str:
    """One policy line in Casbin's CSV form (``p, a, b``), quoting a value that holds a comma,
    a quote or a ``#`` so ``read_csv`` reads it back verbatim."""
    return ", ".join(_cell(v) for v in (ptype, *values))


def read_csv(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The lines of a CSV policy file as (line number, fields); comments and blank lines
    left out. Raises PolicyError when the file cannot be read as UTF-8 text."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PolicyError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read {path}: {exc}") from None
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    try:
        for fields in reader:
            cells = [f.strip() for f in fields]
            if not cells or cells == [""] or cells[0].startswith("#"):
                continue
            yield reader.line_num, cells
    except csv.Error as exc:
        raise PolicyError(f"{path} line {reader.line_num}: {exc}") from None


def _check_model(model: Path) -> None:
    """Refuse a model file that is missing or that pycasbin cannot read."""
    from casbin.model import Model

    if not model.is_file():
        raise PolicyError(f"{model} does not exist")
    try:
        Model().load_model(str(model))
    except Exception as exc:  # pycasbin raises assorted errors for bad files
        raise PolicyError(f"cannot load {model.name}: {exc}") from exc


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

    def rules(self) -> PolicyRead:
        """The policy's lines, each checked on its own; raises PolicyError when the model or
        the file cannot be read at all."""
        _check_model(self.model)
        read = PolicyRead()
        for number, (ptype, *values) in read_csv(self.policy):
            read.add(f"{self.policy.name} line {number}", ptype, tuple(values))
        return read

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
        first = (str(exc).splitlines() or [""])[0]  # (not SQLAlchemy's "Background on…" link)
        why = cause(exc) or f"{type(exc).__name__}: {first}"
        return PolicyError(f"policy database {self.describe()}: {why}"[:500])

    def ensure(self) -> None:
        """Create the policy table, the history's and the aliases' if missing; raises
        PolicyError. Another process making them at the same moment (a watcher recording a
        rules edit while a command reads the history) makes one CREATE fail with "already
        exists" between its check and its statement: a second pass finds them made."""
        for last in (False, True):
            try:
                tables.ensure_tables(_engine(self.url), TABLE)
                identities.ensure_table(_engine(self.url))
                return
            except Exception as exc:  # unreachable server, bad credentials, bad URL, a race
                if last:
                    raise self._failure(exc) from exc

    def stamp(self) -> tuple[Any, ...]:
        """Cheap change detection: row count, highest id and total length of the rules (an
        added, removed or edited rule changes at least one, also when edited with SQL), and
        the newest recorded change — every write through this project records one, and a
        role moved from one person to another of a name as long (the newest row revoked, a
        row added: SQLite gives it the same id) changes nothing else. Raises PolicyError when
        the database cannot be reached."""
        import sqlalchemy

        lengths = " + ".join(
            f"LENGTH(COALESCE({c}, ''))" for c in ("ptype", "v0", "v1", "v2", "v3", "v4", "v5")
        )
        query = sqlalchemy.text(f"SELECT COUNT(*), MAX(id), SUM({lengths}) FROM {TABLE}")
        events = tables.tables(TABLE)[2]
        newest = sqlalchemy.select(sqlalchemy.func.max(events.c.id))
        try:
            with _engine(self.url).connect() as conn:
                recorded = sqlalchemy.inspect(conn).has_table(events.name)
                row = (*conn.execute(query).one(), conn.execute(newest).scalar() if recorded else 0)
                aliases = identities.stamp_in(conn)
                sids = directory_sids.stamp_in(conn)
        except Exception as exc:
            raise self._failure(exc) from exc
        model = self.model.stat()
        return (model.st_mtime_ns, *row, *aliases, *sids)

    def rules(self) -> PolicyRead:
        """The policy's rows, read field by field and each checked on its own; raises
        PolicyError when the model or the database cannot be read."""
        _check_model(self.model)
        read = PolicyRead()
        try:
            rows = tables.rule_rows(_engine(self.url), TABLE)
        except Exception as exc:
            raise self._failure(exc) from exc
        for row_id, ptype, values in rows:
            read.add(f"row {row_id}", ptype, values, row_id)
        try:
            read.aliases = identities.read_rows(_engine(self.url))
            read.sids = directory_sids.read_rows(_engine(self.url))
        except Exception as exc:
            raise self._failure(exc) from exc
        return read

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
            tables.ensure_tables(engine, TABLE)
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
