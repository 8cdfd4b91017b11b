"""What a company directory costs (issue #35 §5): 50,000 users and 5,000 groups generated into a
real slapd, synced into the policy database by ``retrieval-svc policy sync-ldap``; then the
policy's reload and what a request pays with it, against a small directory's, in one run.

    python -m bench.permissions.directory [--users 50000] [--groups 5000] [--per-user 2]
        [--window 10] [--interval 60] [--out DIR]

Every user is in ``--per-user`` random groups; one group in ten is nested in another (its
members pass on). The mapping is ``all_groups: true`` (each group gives the role of its name),
so every membership becomes a grant. Measured:

* the first sync (every grant added) and a second one with nothing changed (a cron's steady
  state): seconds and the peak resident memory of the command;
* ``sync-ldap --every`` after ``--moves`` people changed group: its second sync reads only
  what changed (bench/permissions/directory_delta.py);
* a person's move in force at the service (``--window`` people join a group and leave it
  again while ``sync-ldap --every --interval`` runs, a prober asking as them every 100 ms;
  bench/permissions/directory_window.py): p50 / p95 / max with the change stamp asked every
  5 s between syncs, and at the interval alone. Target: p95 ≤ one interval;
* the policy: rows, the SQLite file's size;
* a reload: loading and indexing the whole policy, as the service's compiler child does;
* ``POST /retrieval`` p50 at concurrency 1 with a casbin key and a directory user as the
  principal, from two services running at once — one with the large policy, one with a small
  one (500 users, 50 groups) — asked in alternation, so the machine's noise falls on both.
  Target: p50 large ≤ 1.2 × p50 small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from elasticsearch import AsyncElasticsearch

from bench.harness import ROOT, finish, machine, parser
from bench.harness.service import index_sample, start_service
from bench.harness.tree import run_measured
from bench.permissions.directory_delta import delta_sync
from bench.permissions.directory_window import KB, pick, window, write_documents
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.auth.keys import hash_key
from retrieval_svc.search.index import template_name
from retrieval_svc.tenancy import DEFAULT_TENANT, tenant_alias
from retrieval_svc.words import say

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
SUFFIX = "dc=example,dc=org"
ALIAS = "rsvc-bench-directory"
KEY = "bench-directory-key-0123456789"
TARGET_RATIO = 1.2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_ldif(path: Path, ou: str, users: int, groups: int, per_user: int) -> None:
    """The directory as LDIF for slapadd: ``ou=<ou>`` under people and groups."""
    rng = random.Random(35)
    members: list[list[str]] = [[] for _ in range(groups)]
    for u in range(users):
        for g in rng.sample(range(groups), min(per_user, groups)):
            members[g].append(f"uid={ou}-u{u},ou={ou},ou=people,{SUFFIX}")
    for g in range(1, groups, 10):  # one in ten nested in an earlier group
        members[rng.randrange(g)].append(f"cn={ou}-g{g},ou={ou},ou=groups,{SUFFIX}")
    with path.open("w", encoding="utf-8") as f:
        for parent in ("people", "groups"):
            f.write(f"dn: ou={ou},ou={parent},{SUFFIX}\nobjectClass: organizationalUnit\n")
            f.write(f"ou: {ou}\n\n")
        for u in range(users):
            f.write(f"dn: uid={ou}-u{u},ou={ou},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\n")
            f.write(f"uid: {ou}-u{u}\ncn: {ou}-u{u}\nsn: u{u}\n\n")
        for g in range(groups):
            f.write(f"dn: cn={ou}-g{g},ou={ou},ou=groups,{SUFFIX}\nobjectClass: groupOfNames\n")
            f.write(f"cn: {ou}-g{g}\n")
            for member in members[g] or [f"cn=admin,{SUFFIX}"]:
                f.write(f"member: {member}\n")
            f.write("\n")


def sync_file(path: Path, url: str, ou: str) -> None:
    body = {
        "tenant": DEFAULT_TENANT,
        "url": url,
        "bind_dn": f"cn=admin,{SUFFIX}",
        "bind_password_env": "BENCH_LDAP_PASSWORD",
        "users": {"base": f"ou={ou},ou=people,{SUFFIX}"},
        "groups": {"base": f"ou={ou},ou=groups,{SUFFIX}"},
        "all_groups": True,
        "page_size": 1000,
        "timeout_s": 300,
    }
    path.write_text(json.dumps(body), encoding="utf-8")


def sync(db: str, config: Path) -> dict[str, Any]:
    env = {**os.environ, "BENCH_LDAP_PASSWORD": "admin"}
    started = time.perf_counter()
    run = run_measured(
        [*SVC, "policy", "--db", db, "sync-ldap", str(config)], env=env, timeout_s=3600
    )
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(f"sync-ldap failed: {run.stderr[-2000:]}")
    return {
        "s": round(seconds, 1),
        "peak_rss_mb": round(run.peak_bytes / 2**20),
        "said": run.stdout.strip().splitlines()[-1],
    }


def directory(
    db_path: Path,
    url: str,
    port: int,
    ou: str,
    users: int,
    groups: int,
    per_user: int,
    work: Path,
    moves: int = 0,
) -> dict[str, Any]:
    """Load one directory into slapd, sync it twice into a fresh database; the figures."""
    ldif = work / f"{ou}.ldif"
    started = time.perf_counter()
    write_ldif(ldif, ou, users, groups, per_user)
    loaded = subprocess.run(
        [str(ROOT / "scripts" / "ldap.sh"), "load", str(port), str(ldif)],
        capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    if loaded.returncode != 0:
        raise RuntimeError(loaded.stderr)
    load_s = time.perf_counter() - started
    db = f"sqlite:///{db_path}"
    allowed = subprocess.run(
        [*SVC, "policy", "--db", db, "allow", "anyone", "*"],
        capture_output=True,
        text=True,
        check=False,
    )
    if allowed.returncode != 0:
        raise RuntimeError(allowed.stderr)
    config = work / f"{ou}.yaml"
    sync_file(config, url, ou)
    first = sync(db, config)
    again = sync(db, config)
    changed = delta_sync(db, config, url, ou, SUFFIX, users, groups, moves) if moves else None
    store = PolicyDatabase(DEFAULT_MODEL, db)
    started = time.perf_counter()
    acl = AccessControl(source=store)
    reload_s = time.perf_counter() - started
    grouping = store.rules().grouping
    return {
        "users": users,
        "groups": groups,
        "directory_load_s": round(load_s, 1),
        "first_sync": first,
        "unchanged_sync": again,
        "changed_sync": changed,
        "grants": len(grouping),
        "policy_db_mb": round(db_path.stat().st_size / 2**20, 1),
        "reload_s": round(reload_s, 2),
        "roles_of_one_user": len(acl.user_roles(f"{ou}-u0", DEFAULT_TENANT)),
    }


def _service(db: str, ou: str, es_url: str, work: Path) -> tuple[int, subprocess.Popen[bytes], Any]:
    keys = work / "keys.json"
    keys.write_text(json.dumps([{"name": "bench", "sha256": hash_key(KEY)}]), "utf-8")
    port = free_port()
    env = {
        **os.environ,
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": ALIAS,
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_EMBEDDER": "none",
        "RSVC_PORT": str(port),
    }
    log = (work / f"service-{ou}.log").open("w")
    return port, start_service(env=env, port=port, log=log, timeout_s=600), log


def _summary(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


async def served(
    small: tuple[str, int], large: tuple[str, int], requests: int, es_url: str, work: Path
) -> dict[str, dict[str, Any]]:
    """``POST /retrieval`` at concurrency 1 against two services at once — one with each
    policy — in alternation, so the machine's noise falls on both alike; the principal a
    random user of that service's directory."""
    rng = random.Random(7)
    started = {
        ou: _service(f"sqlite:///{work / f'{ou}.db'}", ou, es_url, work) for ou, _ in (small, large)
    }
    times: dict[str, list[float]] = {ou: [] for ou in started}
    try:
        clients = {
            ou: httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=60,
            )
            for ou, (port, _, _) in started.items()
        }
        for i in range(requests + 50):  # the first 50 of each warm up
            for ou, users in (small, large) if i % 2 else (large, small):
                body = {
                    "knowledge_id": "building-ops",
                    "query": rng.choice(["巡更", "配电房", "电梯维保", "访客登记", "消防值班"]),
                    "retrieval_setting": {"top_k": 3},
                    "metadata_condition": {
                        "conditions": [
                            {
                                "name": "user_id",
                                "comparison_operator": "is",
                                "value": f"{ou}-u{rng.randrange(users)}",
                            }
                        ]
                    },
                }
                began = time.perf_counter()
                (await clients[ou].post("/retrieval", json=body)).raise_for_status()
                if i >= 50:
                    times[ou].append(time.perf_counter() - began)
        for client in clients.values():
            await client.aclose()
    finally:
        for _, child, log in started.values():
            child.terminate()
            child.wait(timeout=60)
            log.close()
    return {ou: _summary(t) for ou, t in times.items()}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-directory-"))
    port = free_port()
    script = ROOT / "scripts" / "ldap.sh"
    started = subprocess.run(
        [str(script), "start", str(port)], capture_output=True, text=True, check=True
    )
    url = started.stdout.strip()
    es = AsyncElasticsearch(args.es_url)
    try:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await index_sample(es, ALIAS, DEFAULT_TENANT)
        small = directory(work / "small.db", url, port, "small", 500, 50, args.per_user, work)
        print(say("bench_small_directory", result=small), file=sys.stderr)
        large = directory(
            work / "large.db", url, port, "large", args.users, args.groups, args.per_user, work,
            moves=args.moves,
        )  # fmt: skip
        print(say("bench_large_directory", result=large), file=sys.stderr)
        both = await served(("small", 500), ("large", args.users), args.requests, args.es_url, work)
        served_small, served_large = both["small"], both["large"]
        print(say("bench_served", small=served_small, large=served_large), file=sys.stderr)
        windows = await in_force(es, args, url, work) if args.window else []
    finally:
        subprocess.run([str(script), "stop", str(port)], capture_output=True, check=False)
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()
    ratio = round(served_large["p50_ms"] / served_small["p50_ms"], 2)
    return {
        "machine": machine(),
        "small": small,
        "large": large,
        "in_force": windows,
        "retrieval_small": served_small,
        "retrieval_large": served_large,
        "p50_ratio": ratio,
        "target": f"/retrieval p50 with the large policy <= {TARGET_RATIO} x with the small one",
        "met": ratio <= TARGET_RATIO,
    }


async def in_force(
    es: AsyncElasticsearch, args: argparse.Namespace, url: str, work: Path
) -> list[dict[str, Any]]:
    """The window of a person's move at the service (directory_window.py): with the change
    stamp asked between syncs, and at the interval alone."""
    db = f"sqlite:///{work / 'large.db'}"
    pairs = pick(db, "large", args.users, args.groups, args.window)
    write_documents(work / "window", "large", [g for _, g in pairs])
    await index_source(
        es,
        LocalSource(work / "window"),
        IndexOptions(KB, tenant_alias(ALIAS, DEFAULT_TENANT)),
    )
    await es.indices.refresh(index=tenant_alias(ALIAS, DEFAULT_TENANT))
    port, child, log = _service(db, "large", args.es_url, work)
    results = []
    try:
        for check_every in (5.0, 0.0):
            result = window(
                db=db, config=work / "large.yaml", url=url, ou="large", suffix=SUFFIX,
                port=port, key=KEY, pairs=pairs, interval_s=args.interval,
                check_every_s=check_every, gap_s=args.interval / 6,
            )  # fmt: skip
            print(say("bench_in_force", result=result), file=sys.stderr)
            results.append(result)
    finally:
        child.terminate()
        child.wait(timeout=60)
        log.close()
    return results


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--users", type=int, default=50_000)
    p.add_argument("--groups", type=int, default=5_000)
    p.add_argument("--per-user", type=int, default=2)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument(
        "--moves", type=int, default=10, help="People changing group between two --every syncs."
    )
    p.add_argument(
        "--window", type=int, default=10,
        help="People who join a group and leave it again while sync-ldap --every runs (0: none).",
    )  # fmt: skip
    p.add_argument("--interval", type=int, default=60, help="sync-ldap --every, for --window.")
    args = p.parse_args(argv)
    result = asyncio.run(main(args))
    return finish(result, args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
