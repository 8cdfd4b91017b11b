"""What ``sync-ldap --every`` pays when a few people change groups (issue #55 §2), measured by
``bench.permissions.directory`` on its large directory.

One ``sync-ldap --every`` process syncs the directory; as soon as its first sync is done,
``moves`` people are moved between groups (two group edits each); its second sync then reads
only what changed (an RFC 4533 refresh: the changed groups with their members, every other
entry as 16 bytes of its UUID) and applies it. Reported: the second sync's seconds (from the
end of its interval to its line), beside the same reads done whole and by refresh in this
process, and whether the grants are then what a whole sync gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ldap3

from bench.harness.heard import starts_as
from retrieval_svc.directory import DirectoryReplica, load_sync, read_directory

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
INTERVAL_S = 5


def _move(
    conn: Any, ou: str, suffix: str, users: int, groups: int, moves: int, start: int = 0
) -> None:
    """``moves`` people each put into one more group (a grant the next sync must add)."""
    for n in range(start, start + moves):
        user = f"uid={ou}-u{n * 997 % users},ou={ou},ou=people,{suffix}"
        group = f"cn={ou}-g{(n * 389 + 7) % groups},ou={ou},ou=groups,{suffix}"
        conn.modify(group, {"member": [(ldap3.MODIFY_ADD, [user])]})


def delta_sync(
    db: str, config: Path, url: str, ou: str, suffix: str, users: int, groups: int, moves: int
) -> dict[str, Any]:
    env = {**os.environ, "BENCH_LDAP_PASSWORD": "admin"}
    os.environ.setdefault("BENCH_LDAP_PASSWORD", "admin")  # (the reads in this process)
    sync = load_sync(config)
    conn = ldap3.Connection(url, f"cn=admin,{suffix}", "admin", auto_bind=True)
    # (a directory loaded by slapadd has no contextCSN until its first write, and a cookie
    # without one makes the server start over: one write, as any live directory has had)
    _move(conn, ou, suffix, users, groups, 1, 10 * moves)
    # The command: its second sync, after more people moved.
    proc = subprocess.Popen(
        [*SVC, "policy", "--db", db, "sync-ldap", str(config), "--every", str(INTERVAL_S),
         "--count", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[tuple[float, str]] = []
    first = ""
    while not starts_as(first, "synced"):  # (the first sync's changes, then its line)
        first = proc.stdout.readline()
        if not first:
            break
    first_at = time.perf_counter()
    mover = threading.Thread(
        target=_move, args=(conn, ou, suffix, users, groups, moves), daemon=True
    )
    mover.start()
    for line in proc.stdout:
        lines.append((time.perf_counter(), line.strip()))
    proc.wait(timeout=3600)
    mover.join()
    if proc.returncode != 0 or not lines:
        said = proc.stderr.read()[-2000:] if proc.stderr else ""
        raise RuntimeError(f"sync-ldap --every failed: {said}")
    # The reads alone, in this process (the directory written since it was loaded, so it has
    # a contextCSN): a replica read whole, more people moved, the replica refreshed.
    replica = DirectoryReplica()
    read_directory(sync, replica)
    _move(conn, ou, suffix, users, groups, moves, 2 * moves)
    started = time.perf_counter()
    refreshed = read_directory(sync, replica)
    refresh_s = time.perf_counter() - started
    started = time.perf_counter()
    whole = read_directory(sync)
    whole_s = time.perf_counter() - started
    agrees = (refreshed.users, refreshed.groups, refreshed.parents) == (
        whole.users,
        whole.groups,
        whole.parents,
    )
    conn.unbind()
    second_at, second = lines[-1]
    return {
        "moves": moves,
        "refresh_read_s": round(refresh_s, 2),
        "refreshed_entries": replica.changed,
        "whole_read_s": round(whole_s, 2),
        "refresh_agrees_with_whole": agrees,
        "first_sync_said": first.strip(),
        "second_sync_s": round(second_at - first_at - INTERVAL_S, 1),
        "second_sync_said": second,
    }
