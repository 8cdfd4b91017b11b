"""Where people's SIDs live, at a company domain's size: what keeping them costs the sync, the
policy's reload and a request, without a domain controller — the domain is generated as the AD
sync reads it (``ad.build`` of users and groups with SIDs, the shape of
bench.permissions.directory_ad's: every user in ``--per-user`` random groups, one group in
ten nested in an earlier one, Domain Users as everyone's primary group), then planned and
written exactly as ``sync-ldap`` does (``planned``, ``PolicyAdmin.sync``) into SQLite.

    python -m bench.permissions.directory_sids [--users 50000] [--groups 5000] [--per-user 30]
        [--requests 300] [--out DIR]

Reading the directory over LDAP is left out (bench.permissions.directory_ad measures it
against a real DC); what is measured is what the storage costs: the sync's plan and write
(seconds, peak memory of the process), an unchanged sync, the rows and the database's size,
a reload (seconds, peak memory of a process holding the policy), and ``POST /retrieval``
p50 with a person of that domain against a 500-person one, asked in alternation.
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

from bench.harness import finish, machine, parser
from bench.harness.service import index_sample
from bench.harness.tree import run_measured
from bench.permissions import directory as served_by
from bench.permissions.directory import TARGET_RATIO, served
from retrieval_svc.search.index import template_name
from retrieval_svc.tenancy import DEFAULT_TENANT
from retrieval_svc.words import say

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
ME = [sys.executable, "-m", "bench.permissions.directory_sids"]
DOMAIN = "S-1-5-21-1111111111-2222222222-3333333333"
BASE = "OU={ou},DC=corp,DC=example,DC=org"


def entries(ou: str, users: int, groups: int, per_user: int) -> tuple[list[Any], list[Any]]:
    """The domain as the AD sync reads it: groups (Domain Users and ``groups`` more, RIDs from
    2000) and enabled users (RIDs from 100000), their memberships as bench.directory_ad's."""
    from retrieval_svc.directory.ad import AdGroup, AdUser

    rng = random.Random(67)
    where = BASE.format(ou=ou)
    members: list[list[str]] = [[] for _ in range(groups)]
    dns = [f"CN={ou}-u{u},{where}" for u in range(users)]  # (one string a person, as LDAP
    for u in range(users):  # answers each member value anew: build() normalises them)
        for g in rng.sample(range(groups), min(per_user, groups)):
            members[g].append(dns[u])
    for g in range(1, groups, 10):
        members[rng.randrange(g)].append(f"CN={ou}-g{g},{where}")
    found = [AdGroup(f"CN=Domain Users,{where}", "Domain Users", f"{DOMAIN}-513", [])]
    found += [
        AdGroup(f"CN={ou}-g{g},{where}", f"{ou}-g{g}", f"{DOMAIN}-{2000 + g}", members[g])
        for g in range(groups)
    ]
    people = [
        AdUser(f"CN={ou}-u{u},{where}", f"{ou}-u{u}", f"{DOMAIN}-{100000 + u}", 513, False, {})
        for u in range(users)
    ]
    return found, people


def apply(db: str, ou: str, users: int, groups: int, per_user: int) -> dict[str, Any]:
    """One sync of the generated domain into ``db``, as ``sync-ldap`` applies it (in this
    process, whose peak memory the caller samples)."""
    from retrieval_svc.acl.admin import PolicyAdmin
    from retrieval_svc.acl.history import Actor
    from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
    from retrieval_svc.directory import Limits, planned
    from retrieval_svc.directory.ad import build
    from retrieval_svc.directory.groups import mapping

    started = time.perf_counter()
    directory = build(*entries(ou, users, groups, per_user))
    built = time.perf_counter()
    admin = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, db), Actor(ou, "ldap"))
    roles = mapping({f"{ou}-g0": ["bench-mapped"]})
    plan, _ = planned(admin, DEFAULT_TENANT, ou, directory, roles, Limits())
    planned_at = time.perf_counter()
    admin.sync("sync-ldap", DEFAULT_TENANT, ou, plan.changes, plan.owned, detail="bench",
               people=plan.identities, sids=plan.sids, known_sids=plan.known_sids)  # fmt: skip
    return {
        "build_s": round(built - started, 2),
        "plan_s": round(planned_at - built, 2),
        "write_s": round(time.perf_counter() - planned_at, 2),
        "grants": plan.grants,
        "changes": len(plan.changes),
        "people_with_sids": len(plan.sids),
        "sids_per_person": round(sum(map(len, plan.sids.values())) / max(1, len(plan.sids)), 1),
        "known_sids": len(plan.known_sids),
    }


def reload(db: str, ou: str) -> dict[str, Any]:
    """The policy loaded as the service does at start, then reloaded as after a change
    (seconds); a person's roles asked the first time (decoded), per person."""
    from retrieval_svc.acl.casbin_acl import AccessControl
    from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase

    started = time.perf_counter()
    acl = AccessControl(source=PolicyDatabase(DEFAULT_MODEL, db))
    first = time.perf_counter() - started  # (with the imports and the engine's start)
    started = time.perf_counter()
    acl.reload()
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    roles = [acl.person_roles(f"{ou}-u{u}", DEFAULT_TENANT) for u in range(1000)]
    per = (time.perf_counter() - started) / 1000
    return {"start_s": round(first, 2), "reload_s": round(loaded, 2),
            "roles_first_ask_us": round(per * 1e6, 1),
            "roles_of_one_user": len(roles[0])}  # fmt: skip


def measured(argv: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    run = run_measured(argv, env=dict(os.environ), timeout_s=7200)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    out: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    out["s"] = round(time.perf_counter() - started, 1)
    out["peak_rss_mb"] = round(run.peak_bytes / 2**20)
    return out


def domain(work: Path, ou: str, users: int, groups: int, per_user: int) -> dict[str, Any]:
    db_path = work / f"{ou}.db"
    db = f"sqlite:///{db_path}"
    subprocess.run([*SVC, "policy", "--db", db, "allow", "anyone", "*"], check=True,
                   capture_output=True)  # fmt: skip
    shape = ["--users", str(users), "--groups", str(groups), "--per-user", str(per_user)]
    first = measured([*ME, "--apply", db, "--ou", ou, *shape])
    again = measured([*ME, "--apply", db, "--ou", ou, *shape])
    loaded = measured([*ME, "--reload", db, "--ou", ou])
    import sqlalchemy as sa

    engine = sa.create_engine(db)
    with engine.connect() as conn:
        rules = conn.execute(sa.text("SELECT COUNT(*) FROM casbin_rule")).scalar()
        rows, size = conn.execute(
            sa.text("SELECT COUNT(*), SUM(LENGTH(sids)) FROM directory_sid")
        ).one()
    engine.dispose()
    return {
        "users": users,
        "groups": groups,
        "per_user": per_user,
        "first_sync": first,
        "unchanged_sync": again,
        "policy_rules": rules,
        "sid_rows": {"rows": rows, "bytes": size},
        "policy_db_mb": round(db_path.stat().st_size / 2**20, 1),
        "reload": loaded,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-directory-sids-"))
    small = domain(work, "small", 500, 50, min(args.per_user, 10))
    print(say("bench_small_domain", result=small), file=sys.stderr)
    large = domain(work, "large", args.users, args.groups, args.per_user)
    print(say("bench_large_domain", result=large), file=sys.stderr)
    result: dict[str, Any] = {"machine": machine(), "small": small, "large": large}
    if args.requests:
        alias = served_by.ALIAS = args.alias  # (the services' index: two runs side by side)
        es = AsyncElasticsearch(args.es_url)
        try:
            await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
            await index_sample(es, alias, DEFAULT_TENANT)
            both = await served(("small", 500), ("large", args.users), args.requests,
                                args.es_url, work)  # fmt: skip
        finally:
            await es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
            await es.options(ignore_status=404).indices.delete_index_template(
                name=template_name(alias)
            )
            await es.close()
        ratio = round(both["large"]["p50_ms"] / both["small"]["p50_ms"], 2)
        result |= {
            "retrieval_small": both["small"],
            "retrieval_large": both["large"],
            "p50_ratio": ratio,
            "target": f"/retrieval p50 with the large policy <= {TARGET_RATIO} x the small one",
            "met": ratio <= TARGET_RATIO,
        }
    return result


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--users", type=int, default=50_000)
    p.add_argument("--groups", type=int, default=5_000)
    p.add_argument("--per-user", type=int, default=30)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--alias", default="bench-directory-sids", help="the sample corpus's index")
    p.add_argument("--apply", default=None, help=argparse.SUPPRESS)  # (a child's one sync)
    p.add_argument("--reload", default=None, help=argparse.SUPPRESS)  # (a child's one load)
    p.add_argument("--ou", default="large", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.apply:
        print(json.dumps(apply(args.apply, args.ou, args.users, args.groups, args.per_user)))
        return 0
    if args.reload:
        print(json.dumps(reload(args.reload, args.ou)))
        return 0
    return finish(asyncio.run(main(args)), args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
