"""Casbin behind a small typed wrapper: effective roles and knowledge-base permission.

pycasbin is untyped; types begin here. The model and a default policy ship with the package
(``model.conf``, ``default_policy.csv``); deployments point ``RSVC_CASBIN_MODEL`` /
``RSVC_CASBIN_POLICY`` at their own files. A changed policy file is picked up without a
restart: at most every ``check_interval_s`` a request looks at the files' modification
times, loads them into a fresh enforcer, validates it, and only then swaps it in. A policy
that fails to load or validate is reported and counted; the last good one stays in force.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import casbin

log = logging.getLogger(__name__)
# pycasbin logs its model and every policy line (user ids and their roles) at INFO while it
# loads, before its own enable_log=False takes effect: noise on every start, and personal
# data in the log. Its warnings and errors still come through.
logging.getLogger("casbin").setLevel(logging.WARNING)

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_MODEL = PACKAGE_DIR / "model.conf"
DEFAULT_POLICY = PACKAGE_DIR / "default_policy.csv"

ANYONE = "anyone"
USER_PREFIX = "user:"
READ = "read"


class PolicyError(ValueError):
    """A model or policy that cannot be used."""


def user_subject(user_id: str) -> str:
    """The Casbin subject of a user (kept apart from role names)."""
    return USER_PREFIX + user_id


@dataclass(slots=True)
class _Loaded:
    """One loaded policy: the enforcer, and what it mentions (to skip work for the rest)."""

    enforcer: casbin.Enforcer
    members: frozenset[str]  # names with a parent role (left side of some g line)
    subjects: frozenset[str]  # names granted something (first field of some p line)
    expansions: dict[tuple[str, str], frozenset[str]]

    @classmethod
    def of(cls, enforcer: casbin.Enforcer) -> _Loaded:
        members = frozenset(rule[0] for rule in enforcer.get_grouping_policy())
        subjects = frozenset(rule[0] for rule in enforcer.get_policy())
        return cls(enforcer, members, subjects, {})

    def implicit(self, name: str, tenant: str) -> frozenset[str]:
        """``name``'s inherited roles in ``tenant`` (cached for this policy's lifetime)."""
        if name not in self.members:
            return frozenset()
        key = (name, tenant)
        found = self.expansions.get(key)
        if found is None:
            found = frozenset(self.enforcer.get_implicit_roles_for_user(name, tenant))
            if len(self.expansions) < 100_000:
                self.expansions[key] = found
        return found


@dataclass(frozen=True, slots=True)
class KbDecision:
    """Whether a knowledge base may be read, and which subject's policy allowed it."""

    allowed: bool
    granted_by: str | None


def _validate(enforcer: casbin.Enforcer) -> None:
    for rule in enforcer.get_policy():
        if len(rule) != 4 or not all(rule):
            raise PolicyError(f"policy line {rule} must be: p, subject, tenant, knowledge_id, read")
        if rule[3] != READ:
            raise PolicyError(f"policy line {rule}: the only action is 'read'")
    for rule in enforcer.get_grouping_policy():
        if len(rule) != 3 or not all(rule):
            raise PolicyError(f"role line {rule} must be: g, member, role, tenant")
        if rule[1].startswith(USER_PREFIX):
            raise PolicyError(f"role line {rule}: a user cannot be a role")


def load_enforcer(model: Path, policy: Path) -> casbin.Enforcer:
    """A validated enforcer from files; raises PolicyError."""
    for path in (model, policy):
        if not path.is_file():
            raise PolicyError(f"{path} does not exist")
    try:
        enforcer = casbin.Enforcer(str(model), str(policy))
    except Exception as exc:  # pycasbin raises assorted errors for bad files
        raise PolicyError(f"cannot load {model.name} / {policy.name}: {exc}") from exc
    _validate(enforcer)
    return enforcer


class AccessControl:
    """Effective roles and knowledge-base permission from a Casbin model and policy."""

    def __init__(
        self,
        model: Path = DEFAULT_MODEL,
        policy: Path = DEFAULT_POLICY,
        *,
        check_interval_s: float = 2.0,
        on_reload: Callable[[str], None] | None = None,
    ) -> None:
        self._model = model
        self._policy = policy
        self._interval = check_interval_s
        self._on_reload = on_reload or (lambda _outcome: None)
        self._lock = threading.Lock()
        self._loaded = _Loaded.of(load_enforcer(model, policy))  # bad at start-up: fatal
        self._stamp = self._file_stamp()
        self._checked_at = time.monotonic()
        self.last_error: str | None = None

    def _file_stamp(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in (self._model, self._policy):
            try:
                st = path.stat()
                stamps.append((st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((-1, -1))
        return tuple(stamps)

    def reload(self) -> bool:
        """Load the files now; keep the current policy if they are invalid. True if swapped."""
        with self._lock:
            self._stamp = self._file_stamp()
            try:
                enforcer = load_enforcer(self._model, self._policy)
            except PolicyError as exc:
                self.last_error = str(exc)
                log.error("policy reload failed, keeping the last good policy: %s", exc)
                self._on_reload("error")
                return False
            self._loaded = _Loaded.of(enforcer)
            self.last_error = None
            log.info("policy reloaded from %s", self._policy)
            self._on_reload("ok")
            return True

    def maybe_reload(self) -> None:
        """Reload if the files changed; looks at most every ``check_interval_s``."""
        now = time.monotonic()
        if now - self._checked_at < self._interval:
            return
        self._checked_at = now
        if self._file_stamp() != self._stamp:
            self.reload()

    def expand(self, roles: Iterable[str], tenant: str) -> frozenset[str]:
        """Roles plus every role they inherit in ``tenant``."""
        self.maybe_reload()
        loaded = self._loaded
        out: set[str] = set()
        for role in roles:
            out.add(role)
            out.update(loaded.implicit(role, tenant))
        return frozenset(out)

    def user_roles(self, user_id: str, tenant: str) -> frozenset[str]:
        """Every role a user holds in ``tenant``, inherited ones included."""
        self.maybe_reload()
        return self._loaded.implicit(user_subject(user_id), tenant)

    def kb_decision(
        self, *, tenant: str, user_id: str | None, roles: Iterable[str], knowledge_id: str
    ) -> KbDecision:
        """Whether a principal may read ``knowledge_id``, and on whose grant."""
        self.maybe_reload()
        loaded = self._loaded
        # ``roles`` are already expanded, so only names granted something directly can match;
        # users are checked through the enforcer (their grants may come through g lines).
        subjects = [ANYONE, *sorted(r for r in roles if r in loaded.subjects)]
        if user_id is not None:
            subjects.append(user_subject(user_id))
        for subject in subjects:
            if loaded.enforcer.enforce(subject, tenant, knowledge_id, READ):
                return KbDecision(True, subject)
        return KbDecision(False, None)
