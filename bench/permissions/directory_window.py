"""How long a person's move in the directory takes to be in force at the service (issue #55 §2,
§4: "a directory change p95 ≤ 1 sync interval"), measured by ``bench.permissions.directory``
on its large directory.

A knowledge base of one document per change, each readable only by one group's role (its
sidecar's ``access_roles``), is indexed; the service runs on the large policy, and one
``sync-ldap --every INTERVAL`` process keeps the policy what the directory says. Then people
join those groups at a steady rate, and later leave them again; a prober asks ``POST
/retrieval`` as each moved person every 100 ms, and a change's window is the time from the
directory's write to the first answer that agrees (the document there after a join, gone after
a leave). So it is the whole path: the sync noticing, reading and applying, and the service's
policy check and reload.

Run twice: with the change stamp asked between syncs (``--check-every``, the default 5 s),
and at the interval alone (``--check-every 0``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import ldap3

from bench.harness.heard import starts_as
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, user_subject

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
KB = "directory-window"
PROBE_S = 0.1


@dataclass(slots=True)
class Move:
    """One person joining (or later leaving) one group, and when it was in force."""

    user: str
    group: int
    join: bool
    at: float = 0.0
    agreed: float | None = None

    @property
    def marker(self) -> str:  # (in its document's text only: "只有 large-g17 组的成员…")
        return f"-g{self.group} 组"


def write_documents(folder: Path, ou: str, groups: list[int]) -> None:
    """One document per group, readable by that group's role only."""
    folder.mkdir(parents=True, exist_ok=True)
    for g in groups:
        (folder / f"window-{g}.md").write_text(
            f"# 窗口文档 {g}\n\n只有 {ou}-g{g} 组的成员可以看到这份值班安排。\n", encoding="utf-8"
        )
        (folder / f"window-{g}.md.meta.json").write_text(
            json.dumps({"access_roles": [f"{ou}-g{g}"]}), encoding="utf-8"
        )


def pick(db: str, ou: str, users: int, groups: int, n: int) -> list[tuple[str, int]]:
    """``n`` (user, group) pairs where the user holds no role of the group yet: a join gives
    it, a leave takes it back (a nested group's members would hold it another way)."""
    held = {tuple(g[:2]) for g in PolicyDatabase(DEFAULT_MODEL, db).rules().grouping}
    rng = random.Random(55)
    pairs: list[tuple[str, int]] = []
    used: set[int] = set()
    while len(pairs) < n:
        user, group = f"{ou}-u{rng.randrange(users)}", rng.randrange(groups)
        if group in used or (user_subject(user), f"{ou}-g{group}") in held:
            continue
        used.add(group)
        pairs.append((user, group))
    return pairs


def _visible(client: httpx.Client, move: Move) -> bool:
    body = {
        "knowledge_id": KB,
        "query": f"窗口文档 {move.group} 值班安排",
        "retrieval_setting": {"top_k": 50, "score_threshold": 0},
        "metadata_condition": {
            "conditions": [{"name": "user_id", "comparison_operator": "is", "value": move.user}]
        },
    }
    answer = client.post("/retrieval", json=body)
    answer.raise_for_status()
    return any(move.marker in r.get("content", "") for r in answer.json().get("records", []))


def _probe(client: httpx.Client, moves: list[Move], stop: threading.Event) -> None:
    while not stop.is_set():
        for move in moves:
            if move.at and move.agreed is None and _visible(client, move) == move.join:
                move.agreed = time.monotonic()
        time.sleep(PROBE_S)


def _summary(moves: list[Move]) -> dict[str, Any]:
    seen = sorted(m.agreed - m.at for m in moves if m.agreed is not None)
    if not seen:
        return {"n": 0, "missed": len(moves)}
    return {
        "n": len(seen),
        "p50": round(seen[len(seen) // 2], 2),
        "p95": round(seen[min(len(seen) - 1, round(0.95 * (len(seen) - 1)))], 2),
        "max": round(seen[-1], 2),
        "missed": len(moves) - len(seen),
    }


def window(
    *,
    db: str,
    config: Path,
    url: str,
    ou: str,
    suffix: str,
    port: int,
    key: str,
    pairs: list[tuple[str, int]],
    interval_s: int,
    check_every_s: float,
    gap_s: float,
) -> dict[str, Any]:
    """Each pair joined, then left, one change every ``gap_s`` (± half, so the changes fall
    anywhere in the interval) while ``sync-ldap --every`` runs; the windows."""
    env = {**os.environ, "BENCH_LDAP_PASSWORD": "admin"}
    conn = ldap3.Connection(url, f"cn=admin,{suffix}", "admin", auto_bind=True)
    sync = subprocess.Popen(
        [*SVC, "policy", "--db", db, "sync-ldap", str(config), "--every", str(interval_s),
         "--check-every", str(check_every_s)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert sync.stdout is not None
    while not starts_as(line := sync.stdout.readline(), "synced", "unchanged_directory"):
        if not line:
            raise RuntimeError("sync-ldap --every ended before its first sync")
    threading.Thread(target=sync.stdout.read, daemon=True).start()  # (drained)
    moves = [Move(u, g, True) for u, g in pairs] + [Move(u, g, False) for u, g in pairs]
    rng = random.Random(interval_s * 1000 + int(check_every_s * 10))
    stop = threading.Event()
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    prober = threading.Thread(target=_probe, args=(client, moves, stop), daemon=True)
    prober.start()
    try:
        for n, move in enumerate(moves):
            if n == len(pairs):  # (every join in force before the first leave)
                _settle(moves[:n], interval_s * 3 + 60)
            time.sleep(gap_s * rng.uniform(0.5, 1.5))
            group = f"cn={ou}-g{move.group},ou={ou},ou=groups,{suffix}"
            member = f"uid={move.user},ou={ou},ou=people,{suffix}"
            op = ldap3.MODIFY_ADD if move.join else ldap3.MODIFY_DELETE
            if not conn.modify(group, {"member": [(op, [member])]}):
                raise RuntimeError(f"could not change {group}: {conn.result}")
            move.at = time.monotonic()
        _settle(moves, interval_s * 3 + 60)
    finally:
        stop.set()
        prober.join(timeout=30)
        client.close()
        sync.terminate()
        sync.wait(timeout=60)
        conn.unbind()
    return {
        "interval_s": interval_s,
        "check_every_s": check_every_s,
        "joined": _summary(moves[: len(pairs)]),
        "left": _summary(moves[len(pairs) :]),
    }


def _settle(moves: list[Move], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(m.agreed is None for m in moves) and time.monotonic() < deadline:
        time.sleep(0.2)
