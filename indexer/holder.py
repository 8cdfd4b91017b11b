"""Who holds a source's lease, told apart across restarts: the host, its boot, the process
and when it started — so a watcher started again on the same host (a crash, a container
restart in its pod, a restart by hand) knows its predecessor is dead and takes over at once,
while a second watcher of the same source that is alive (even stopped, even starved of CPU)
is waited for.

A process is the same process when its id *and* its start time (``/proc/PID/stat``, in clock
ticks since boot) are: a recycled id, or a container's new first process that got the old
one's id, is another process. A boot id that differs means the host restarted and every
holder recorded under the old one is gone.

A process id means something only in its PID namespace: two containers sharing the host's
name (``docker --network host``, ``hostNetwork`` pods) each see their own processes, and one's
watcher would read the other's, alive, as gone — and the two would take the lease from each
other in turn. So the namespace (``/proc/self/ns/pid``) is recorded too, and a holder recorded
in another namespace is never judged from here: its lease is waited out (or, under a
configured name, taken over as on another host).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = Path("/proc/self/ns/pid")


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None (gone, or unknown)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # (the command name, in parentheses, may hold spaces and parentheses: split after it)
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # (field 22 of the whole line: starttime)
    except (IndexError, ValueError):
        return None


def _boot() -> str:
    try:
        return BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _namespace() -> str:
    """This process's PID namespace (``pid:[INODE]``), or "" where it cannot be told."""
    try:
        return os.readlink(PID_NAMESPACE)
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class Process:
    """This process as a lease records it."""

    host: str
    boot: str
    pid: int
    started: int | None
    namespace: str = ""  # its PID namespace (``pid:[INODE]``)

    @classmethod
    def here(cls) -> Process:
        pid = os.getpid()
        return cls(socket.gethostname(), _boot(), pid, _started(pid), _namespace())

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "boot": self.boot, "pid": self.pid, "started": self.started,
                "pid_namespace": self.namespace}  # fmt: skip

    def elsewhere(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` records a process this one cannot see: another host, or this
        host's other PID namespace (a record without one, from before it was kept: unknown
        too)."""
        if entry.get("host") != self.host:
            return True
        return not self.namespace or entry.get("pid_namespace") != self.namespace

    def gone(self, entry: dict[str, Any]) -> bool:
        """Whether the process ``entry`` records is surely gone: it ran on this host, and the
        host has restarted since, or no process with its id and start time runs now in
        this PID namespace. (On another host or in another namespace nothing can be told:
        False.)"""
        if entry.get("host") != self.host:
            return False
        if not self.boot or entry.get("boot") != self.boot:
            return bool(self.boot and entry.get("boot"))  # (a boot since: gone)
        if self.elsewhere(entry):
            return False
        pid, started = entry.get("pid"), entry.get("started")
        if not isinstance(pid, int):
            return False
        if pid == self.pid:  # (its id is ours: this very process, or one that is gone)
            return started != self.started
        now = _started(pid)
        if now is None:
            return not Path(f"/proc/{pid}").exists() and Path("/proc/self").exists()
        return started is not None and now != started
