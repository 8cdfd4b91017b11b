"""Casbin behind a small typed wrapper: effective roles and knowledge-base permission.

pycasbin is untyped; types begin here. The model and a default policy ship with the package
(``model.conf``, ``default_policy.csv``); deployments point ``RSVC_CASBIN_MODEL`` /
``RSVC_CASBIN_POLICY`` at their own files. A changed policy file is picked up without a
restart: every ``check_interval_s`` a watcher task looks at the files' modification times;
a child process loads a changed policy, validates and indexes it, and only then is it
swapped in. A policy that cannot be read at all (a missing file, an unreachable database) is
reported and counted, and the last good one stays in force. A line that means nothing is
skipped on its own (a grant not read is a grant not given) and reported — logged once,
counted in a gauge, listed by ``retrieval-svc policy check`` — while every other line, of
every tenant, takes effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from retrieval_svc.acl.identities import Identity
from retrieval_svc.acl.policy_index import PolicyIndex, compile_pieces, index_of
from retrieval_svc.acl.policy_store import (
    ANYONE,
    DEFAULT_MODEL,
    DEFAULT_POLICY,
    PolicyError,
    PolicyFiles,
    PolicySource,
    Skipped,
    user_subject,
)
from retrieval_svc.acl.sids import PERSON_ROLES
from retrieval_svc.tenancy import EVERY_TENANT
from retrieval_svc.words import say

log = logging.getLogger(__name__)
# pycasbin logs its model and every policy line (user ids and their roles) at INFO while it
# loads, before its own enable_log=False takes effect: noise on every start, and personal
# data in the log. Its warnings and errors still come through.
logging.getLogger("casbin").setLevel(logging.WARNING)

MIN_CHECK_INTERVAL_S = 0.05  # the watcher's fastest poll (RSVC_POLICY_CHECK_INTERVAL_S=0)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


@dataclass(frozen=True, slots=True)
class KbDecision:
    """Whether a knowledge base may be read, and which subject's policy allowed it."""

    allowed: bool
    granted_by: str | None


def _warm() -> int:
    """In the compiling child: import what compiling needs, now rather than on the first
    change (a spawned child starting at nice 10 beside busy workers once took 5-9 s)."""
    import casbin  # noqa: F401

    return os.getpid()


def _compiler_child(parent: int) -> None:
    """Set up the compiling child: a lower priority (requests on this machine come first),
    and its end when its parent ends, however that ends (a SIGKILLed worker cannot clean up):
    Linux's parent-death signal, and a parent already gone by now checked once."""
    with contextlib.suppress(OSError):
        os.nice(10)
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(0)


class _Compiler:
    """One child process that compiles policies, started on first use and kept for the next."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_compiler_child,
                initargs=(os.getpid(),),
            )
        return self._pool

    async def warm(self) -> int:
        """Start the child and load the compiler in it; its pid. The first policy change then
        costs what every later one does, instead of a process start and pycasbin's import."""
        return await asyncio.get_running_loop().run_in_executor(self._executor(), _warm)

    async def compile(self, source: PolicySource) -> PolicyIndex:
        try:
            pieces = await asyncio.get_running_loop().run_in_executor(
                self._executor(), compile_pieces, source
            )
        except BrokenProcessPool:  # the child died (killed, out of memory): a new one next time
            self.close()
            raise
        return await PolicyIndex.assemble(pieces)

    def close(self) -> None:
        """Stop the child now, even mid-compile (a shutdown must not wait for a policy)."""
        if self._pool is not None:
            processes = list((self._pool._processes or {}).values())  # (3.14: terminate_workers)
            self._pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.terminate()
            for process in processes:
                process.join(timeout=5)
            self._pool = None


class AccessControl:
    """Effective roles and knowledge-base permission from a Casbin model and policy."""

    def __init__(
        self,
        model: Path = DEFAULT_MODEL,
        policy: Path = DEFAULT_POLICY,
        *,
        source: PolicySource | None = None,
        check_interval_s: float = 2.0,
        on_reload: Callable[[str], None] | None = None,
        on_skipped: Callable[[int], None] | None = None,
    ) -> None:
        self.source = source or PolicyFiles(model, policy)
        self._interval = check_interval_s
        self._on_reload = on_reload or (lambda _outcome: None)
        self._on_skipped = on_skipped or (lambda _count: None)
        self._lock = threading.Lock()
        self._stamp = self.source.stamp()
        # Unreadable at start-up (no file, no database): fatal. Lines that mean nothing are
        # skipped and reported; the service starts with every other line in force.
        self._loaded = index_of(self.source)
        self._report_skipped((), self._loaded.skipped)
        self.last_error: str | None = None
        self._compiler: _Compiler | None = None  # the watcher's, while it runs

    def _swap(self, loaded: PolicyIndex | PolicyError) -> bool:
        if isinstance(loaded, PolicyError):
            self.last_error = str(loaded)
            log.error(say("log_policy_reload_failed", why=loaded))
            self._on_reload("error")
            return False
        before = self._loaded.skipped
        self._loaded = loaded  # one assignment: a request sees the old policy or the new
        self.last_error = None
        self._report_skipped(before, loaded.skipped)
        log.info(say("log_policy_reloaded", source=self.source.describe()))
        self._on_reload("ok")
        return True

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """The stored lines the policy in force left out, and why."""
        return self._loaded.skipped

    def _report_skipped(self, before: tuple[Skipped, ...], now: tuple[Skipped, ...]) -> None:
        """Log each newly skipped line once (not again at every reload), and count them all."""
        seen = {(s.where, s.values) for s in before}
        fresh = [s for s in now if (s.where, s.values) not in seen]
        for line in fresh[:20]:
            log.error(say("log_policy_line_skipped", line=line.describe()))
        if len(fresh) > 20:
            log.error(say("log_policy_more_skipped", n=len(fresh) - 20))
        self._on_skipped(len(now))

    def reload(self) -> bool:
        """Load the policy now, in this thread; keep the current one if it is invalid.
        True if swapped. (The service's watcher compiles in a child process instead.)"""
        with self._lock:
            try:
                self._stamp = self.source.stamp()
                loaded: PolicyIndex | PolicyError = index_of(self.source)
            except PolicyError as exc:
                loaded = exc
            return self._swap(loaded)

    def reload_if_changed(self) -> bool:
        """Reload in this thread if the policy changed since the last load. True if a new
        policy is in force."""
        try:
            if self.source.stamp() == self._stamp:
                return False
        except PolicyError as exc:
            return self._swap(exc)
        return self.reload()

    async def watch(self) -> None:
        """Poll the policy every ``check_interval_s``; compile a changed one in a child
        process and swap it in, forever.

        Requests never load or compile a policy: they read the one in force, and a reload
        swaps it in one assignment when it is ready. The child does the parsing (pure Python
        in pycasbin) and indexing, at a lower priority; this process only unpickles the
        index piece by piece, yielding between pieces, so a huge policy cannot stall requests.
        """
        compiler = self._compiler = _Compiler()
        try:
            try:
                await compiler.warm()
            except Exception:  # (a broken child is made anew by the first compile)
                log.exception("policy compiler did not start; it will on the first change")
            while True:
                await asyncio.sleep(max(self._interval, MIN_CHECK_INTERVAL_S))
                try:
                    await self.refresh(compiler)
                except Exception:  # never let the watcher die: the next tick tries again
                    log.exception("policy watcher failed")
        finally:
            compiler.close()

    async def refresh(self, compiler: _Compiler) -> bool:
        """One watcher tick: compile and swap if the policy changed. True if swapped."""
        try:
            stamp = await asyncio.to_thread(self.source.stamp)
        except PolicyError as exc:  # the database is unreachable: say so once, keep the policy
            if str(exc) != self.last_error:
                self._swap(exc)
            return False
        if stamp == self._stamp:
            return False
        try:
            loaded: PolicyIndex | PolicyError = await compiler.compile(self.source)
        except PolicyError as exc:
            loaded = exc
        # Recorded only now: if the child died instead (killed, out of memory), the stamp is
        # unchanged and the next tick compiles again with a new child.
        self._stamp = stamp
        return self._swap(loaded)

    def expand(self, roles: Iterable[str], tenant: str) -> frozenset[str]:
        """Roles plus every role they inherit in ``tenant``."""
        loaded = self._loaded
        out: set[str] = set()
        for role in roles:
            out.add(role)
            out.update(loaded.implicit(role, tenant))
        return frozenset(out)

    def identify(self, user_id: str | None, tenant: str) -> Identity:
        """Who ``user_id`` is in ``tenant``: the person it names — the id itself when the
        policy or the directory knows it, else the person one of whose other ids it is
        (``retrieval_svc.acl.identities``) — or unknown, or ambiguous."""
        loaded = self._loaded
        granted = False
        if user_id is not None:  # (only the key's tenant's policy makes an id known)
            subject = user_subject(user_id)
            granted = (
                subject in loaded.parents.get(tenant, {})
                or subject in loaded.sids.get(tenant, {})
                or any(
                    dom in (tenant, EVERY_TENANT) for dom, _, _ in loaded.grants.get(subject, ())
                )
            )
        return loaded.directory.resolve(user_id, tenant, granted=granted)

    def user_roles(self, user_id: str, tenant: str) -> frozenset[str]:
        """Every role a user holds in ``tenant``, inherited ones included, and the SIDs a
        directory sync gives them (``retrieval_svc.acl.directory_sids``)."""
        loaded, subject = self._loaded, user_subject(user_id)
        return loaded.implicit(subject, tenant) | loaded.sid_roles(subject, tenant)

    def person_roles(self, user_id: str, tenant: str) -> frozenset[str]:
        """The roles a principal who is this person holds: ``user_roles``, and the SIDs
        Windows gives every authenticated person (Everyone, Authenticated Users:
        ``retrieval_svc.acl.sids``), which a caller naming no one never holds."""
        return self.user_roles(user_id, tenant) | PERSON_ROLES

    def kb_decision(
        self, *, tenant: str, user_id: str | None, roles: Iterable[str], knowledge_id: str
    ) -> KbDecision:
        """Whether a principal may read ``knowledge_id``, and on whose grant."""
        loaded = self._loaded
        # ``roles`` are the principal's effective roles, hierarchy expanded (the user's
        # Casbin roles included), so a grant to any of them, to the user or to anyone decides
        # exactly as the model's g(r.sub, p.sub, r.dom) would.
        subjects = [ANYONE, *sorted(r for r in roles if r in loaded.grants)]
        if user_id is not None:
            user = user_subject(user_id)
            subjects += [user, *sorted(loaded.implicit(user, tenant) & loaded.grants.keys())]
        for subject in subjects:
            if loaded.grant(subject, tenant, knowledge_id):
                return KbDecision(True, subject)
        return KbDecision(False, None)
