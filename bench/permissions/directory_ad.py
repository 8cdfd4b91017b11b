"""What an Active Directory domain costs the sync and a request, where people hold SIDs: users
and groups generated into a real Samba AD domain controller (scripts/samba-ad.sh), synced by
``retrieval-svc policy sync-ldap`` (``ad`` detected: every person gets ``sid:`` roles for
their own SID, Domain Users and every group they are in, transitively), then ``POST
/retrieval`` p50 with a directory user as the principal, against a small domain's.

    python -m bench.permissions.directory_ad [--users 5000] [--groups 500] [--per-user 30]
        [--moves 10] [--requests 500] [--large-ou large] [--dc-env DC.ENV] [--out DIR]

Every user is in ``--per-user`` random groups; one group in ten is nested in an earlier one.
One group is mapped to a named role; everything else a person holds is SIDs — kept one row a
person (``directory_sid``; before, one policy line per person and SID), counted here as
``sid_rows`` (bench.permissions.directory measures the same for OpenLDAP's named roles).
Measured: loading the domain (offline, with ``ldbadd``); the first sync and an unchanged one
(seconds, peak resident memory of the command); the grants, the SID rows and the policy's
size; a reload; what ``--every`` reads after ``--moves`` people joined a group (by
``uSNChanged``) against a whole read; and the request's p50 with each policy (two services
asked in alternation). Target: p50 large <= 1.2 x small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.harness import ROOT, finish, machine, parser
from bench.harness.service import index_sample
from bench.permissions.directory import ALIAS, TARGET_RATIO, served, sync
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.directory import DirectoryReplica, load_sync, read_directory
from retrieval_svc.search.index import template_name
from retrieval_svc.tenancy import DEFAULT_TENANT
from retrieval_svc.words import say

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
SCRIPT = ROOT / "scripts" / "samba-ad.sh"


def start_dc() -> dict[str, str]:
    done = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/samba-ad.sh start: {done.stderr[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def write_ldif(path: Path, ou: str, base: str, users: int, groups: int, per_user: int) -> None:
    """The domain's part ``OU=<ou>`` as LDIF for ldbadd: enabled users (no password needed),
    groups with their members, one group in ten nested in an earlier one."""
    rng = random.Random(67)
    where = f"OU={ou},{base}"
    members: list[list[str]] = [[] for _ in range(groups)]
    for u in range(users):
        for g in rng.sample(range(groups), min(per_user, groups)):
            members[g].append(f"CN={ou}-u{u},{where}")
    for g in range(1, groups, 10):
        members[rng.randrange(g)].append(f"CN={ou}-g{g},{where}")
    with path.open("w", encoding="utf-8") as out:
        out.write(f"dn: {where}\nobjectClass: organizationalUnit\n\n")
        for u in range(users):
            out.write(f"dn: CN={ou}-u{u},{where}\nobjectClass: user\n"
                      f"sAMAccountName: {ou}-u{u}\nuserAccountControl: 544\n\n")  # fmt: skip
        for g in reversed(range(groups)):  # (a nested group exists before its parent)
            out.write(f"dn: CN={ou}-g{g},{where}\nobjectClass: group\nsAMAccountName: {ou}-g{g}\n")
            out.writelines(f"member: {m}\n" for m in members[g])
            out.write("\n")


def load(
    dc: dict[str, str], ou: str, users: int, groups: int, per_user: int, work: Path
) -> float | None:
    """Load ``OU=<ou>`` into the DC's database (ldbadd, without fsync); None when it is there
    already (a DC kept from an earlier run: ``--dc-env``), else the seconds it took."""
    sam = f"{dc['SAMBA_AD_DIR']}/private/sam.ldb"
    where = f"OU={ou},{dc['SAMBA_AD_BASE_DN']}"
    there = subprocess.run(["ldbsearch", "-H", sam, "-b", where, "-s", "base", "dn"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if there.returncode == 0 and "returned 1 records" in there.stdout:
        return None
    ldif = work / f"{ou}.ldif"
    write_ldif(ldif, ou, dc["SAMBA_AD_BASE_DN"], users, groups, per_user)
    started = time.perf_counter()
    loaded = subprocess.run(["ldbadd", "--nosync", "-H", sam, str(ldif)], capture_output=True,
                            text=True, check=False, timeout=14400)  # fmt: skip
    if loaded.returncode != 0:
        raise RuntimeError(loaded.stderr[-2000:])
    return time.perf_counter() - started


def sync_file(path: Path, dc: dict[str, str], ou: str) -> None:
    where = f"OU={ou},{dc['SAMBA_AD_BASE_DN']}"
    body = {
        "tenant": DEFAULT_TENANT,
        "url": dc["SAMBA_AD_LDAPS_URL"],
        "ca_file": dc["SAMBA_AD_CA"],
        "bind_dn": dc["SAMBA_AD_ADMIN_DN"],
        "bind_password_env": "BENCH_AD_PASSWORD",
        "users": {"base": where, "filter": "(objectClass=user)", "id_attribute": "sAMAccountName"},
        "groups": {"base": where, "filter": "(objectClass=group)"},
        "roles": {f"{ou}-g0": ["bench-mapped"]},
        "page_size": 1000,
        "timeout_s": 600,
    }
    path.write_text(json.dumps(body), encoding="utf-8")


def moved(dc: dict[str, str], ou: str, users: int, groups: int, moves: int, work: Path) -> int:
    """``moves`` people join a group (ldbmodify, as an admin's change; one already a member
    is skipped): how many joined."""
    rng = random.Random(moves)
    where = f"OU={ou},{dc['SAMBA_AD_BASE_DN']}"
    sam = f"{dc['SAMBA_AD_DIR']}/private/sam.ldb"
    joined = 0
    for i in range(moves):
        user, group = rng.randrange(users), (groups - 1 - i) % groups
        path = work / f"{ou}-move-{i}.ldif"
        path.write_text(f"dn: CN={ou}-g{group},{where}\nchangetype: modify\nadd: member\n"
                        f"member: CN={ou}-u{user},{where}\n", "utf-8")  # fmt: skip
        done = subprocess.run(["ldbmodify", "-H", sam, str(path)], capture_output=True)
        joined += done.returncode == 0
    return joined


def domain(
    dc: dict[str, str], ou: str, users: int, groups: int, per_user: int, work: Path, moves: int
) -> dict[str, Any]:
    """Load one part of the domain, sync it twice into a fresh database; the figures."""
    load_s = load(dc, ou, users, groups, per_user, work)
    db_path = work / f"{ou}.db"
    db = f"sqlite:///{db_path}"
    subprocess.run([*SVC, "policy", "--db", db, "allow", "anyone", "*"], check=True,
                   capture_output=True)  # fmt: skip
    config = work / f"{ou}.yaml"
    sync_file(config, dc, ou)
    first = sync(db, config)
    again = sync(db, config)
    replica = DirectoryReplica()
    sync_conf = load_sync(config)
    started = time.perf_counter()
    read_directory(sync_conf, replica)
    whole_s = time.perf_counter() - started
    joined = moved(dc, ou, users, groups, moves, work)
    started = time.perf_counter()
    read_directory(sync_conf, replica)
    delta = {"joined": joined, "read_s": round(time.perf_counter() - started, 2),
             "entries": replica.changed, "whole_read_s": round(whole_s, 2),
             "why_whole": replica.reason}  # fmt: skip
    store = PolicyDatabase(DEFAULT_MODEL, db)
    started = time.perf_counter()
    acl = AccessControl(source=store)
    reload_s = time.perf_counter() - started
    return {
        "users": users,
        "groups": groups,
        "per_user": per_user,
        "domain_load_s": None if load_s is None else round(load_s, 1),
        "first_sync": first,
        "unchanged_sync": again,
        "every_after_moves": delta,
        "grants": len(store.rules().grouping),
        "sid_rows": sid_rows(store),
        "policy_db_mb": round(db_path.stat().st_size / 2**20, 1),
        "reload_s": round(reload_s, 2),
        "roles_of_one_user": len(acl.person_roles(f"{ou}-u0", DEFAULT_TENANT)),
    }


def sid_rows(store: PolicyDatabase) -> dict[str, int]:
    """How many rows keep people's SIDs (one a person, ``directory_sids``), and their bytes."""
    import sqlalchemy as sa

    with store.engine().connect() as conn:
        if not sa.inspect(conn).has_table("directory_sid"):
            return {"rows": 0, "bytes": 0}
        rows, size = conn.execute(
            sa.text("SELECT COUNT(*), COALESCE(SUM(LENGTH(sids)), 0) FROM directory_sid")
        ).one()
    return {"rows": int(rows), "bytes": int(size)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-directory-ad-"))
    kept = args.dc_env is not None
    dc = (
        dict(
            line.split("=", 1) for line in Path(args.dc_env).read_text().splitlines() if "=" in line
        )
        if kept
        else start_dc()
    )
    os.environ["BENCH_AD_PASSWORD"] = dc["SAMBA_AD_ADMIN_PASSWORD"]
    es = AsyncElasticsearch(args.es_url)
    try:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await index_sample(es, ALIAS, DEFAULT_TENANT)
        small_per = min(args.per_user, 10)
        small = domain(dc, "small", 500, 50, small_per, work, args.moves)
        print(say("bench_small_domain", result=small), file=sys.stderr)
        large = domain(dc, args.large_ou, args.users, args.groups, args.per_user, work, args.moves)
        print(say("bench_large_domain", result=large), file=sys.stderr)
        both = await served(
            ("small", 500), (args.large_ou, args.users), args.requests, args.es_url, work
        )
    finally:
        if not kept:
            subprocess.run([str(SCRIPT), "stop", dc["SAMBA_AD_ADDRESS"]], capture_output=True,
                           check=False)  # fmt: skip
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()
    ratio = round(both[args.large_ou]["p50_ms"] / both["small"]["p50_ms"], 2)
    return {
        "machine": machine(),
        "dc_provision_s": float(dc.get("SAMBA_AD_PROVISION_SECONDS", "0")),
        "dc_start_s": float(dc.get("SAMBA_AD_START_SECONDS", "0")),
        "small": small,
        "large": large,
        "retrieval_small": both["small"],
        "retrieval_large": both[args.large_ou],
        "p50_ratio": ratio,
        "target": f"/retrieval p50 with the large policy <= {TARGET_RATIO} x with the small one",
        "met": ratio <= TARGET_RATIO,
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--users", type=int, default=5_000)
    p.add_argument("--groups", type=int, default=500)
    p.add_argument("--per-user", type=int, default=30)
    p.add_argument("--moves", type=int, default=10)
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--large-ou", default="large", help="the large domain's OU (one per size)")
    p.add_argument(
        "--dc-env",
        default=None,
        help="a running DC's dc.env (scripts/samba-ad.sh start): used and left running; an OU "
        "already loaded is not loaded again",
    )
    args = p.parse_args(argv)
    return finish(asyncio.run(main(args)), args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
