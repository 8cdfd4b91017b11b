"""A child process's peak resident memory, with every process it starts, measured from the
operating system (``/proc``), not estimated."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
                total += int(statm.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
        todo.extend(children.get(pid, ()))
    return total


@dataclass
class Measured:
    """How a command ended, what it printed, and its tree's peak resident memory."""

    returncode: int
    stdout: str
    stderr: str
    peak_bytes: int


def run_measured(
    argv: Sequence[str], *, env: dict[str, str], timeout_s: float, every_s: float = 0.02
) -> Measured:
    """Run ``argv`` to its end (killed past ``timeout_s``), sampling its tree's memory."""
    proc = subprocess.Popen(
        list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(every_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        done.set()
        sampler.join()
    return Measured(proc.returncode, out, err, peak)
