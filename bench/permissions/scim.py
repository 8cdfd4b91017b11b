"""What SCIM provisioning costs (issue #35 §5): an identity provider's first push of
``--users`` users and ``--groups`` groups into a real ``retrieval-svc serve --workers 2``, then
membership changes (``--changes`` members added then removed), one request at a time as Okta
and Entra ID send them.

    python -m bench.permissions.scim [--users 5000] [--groups 500] [--members 20] [--out DIR]

Per operation (create a user, create a group with its members, PATCH a member in, PATCH one
out): p50 and p95 latency. Requests alternate between the two workers (separate connections),
so most writes are taken in by the other worker before it answers (its incremental reload).
Also: the policy's size at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import machine, parser, print_result
from bench.harness.service import start_service
from retrieval_svc.auth.keys import hash_key

SVC = [sys.executable, "-c", "from retrieval_svc.cli import app; app()"]
KEY = "bench-scim-key-0123456789"
SEARCH_KEY = "bench-scim-search-0123456789"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def summary(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
    }


def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-scim-"))
    db = f"sqlite:///{work / 'policy.db'}"
    policy = work / "policy.csv"
    policy.write_text("p, anyone, default, *, read\n", encoding="utf-8")
    subprocess.run(
        [*SVC, "policy", "--db", db, "import", str(policy)], check=True, capture_output=True
    )
    keys = work / "keys.json"
    keys.write_text(
        json.dumps(
            [
                {"name": "idp", "sha256": hash_key(KEY), "scim": True},
                {"name": "search", "sha256": hash_key(SEARCH_KEY)},
            ]
        ),
        "utf-8",
    )
    port = int(args.port)
    env = {
        **os.environ,
        "RSVC_ES_URL": args.es_url,
        "RSVC_INDEX_ALIAS": "rsvc-bench-scim",
        "RSVC_MANAGE_INDEX": "true",
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_CASBIN_DB_URL": db,
        "RSVC_SCIM": "true",
        "RSVC_EMBEDDER": "none",
        "RSVC_POLICY_CHECK_INTERVAL_S": "0.2",
        "RSVC_PORT": str(port),
    }
    times: dict[str, list[float]] = {
        "create user": [],
        "create group": [],
        "add member": [],
        "remove member": [],
    }
    log = (work / "service.log").open("w")
    child = start_service("--workers", "2", env=env, port=port, log=log, timeout_s=600)
    rng = random.Random(35)
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/scim+json"}
    clients = [
        httpx.Client(base_url=f"http://127.0.0.1:{port}/scim/v2", headers=headers, timeout=120)
        for _ in range(2)
    ]
    calls = 0

    def call(kind: str, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        began = time.perf_counter()
        resp = clients[calls % 2].request(method, path, json=body)
        times[kind].append(time.perf_counter() - began)
        resp.raise_for_status()
        return resp.json() if resp.content else {}

    started = time.perf_counter()
    try:
        users = [
            call("create user", "POST", "/Users", {"schemas": [USER], "userName": f"u{i}"})["id"]
            for i in range(args.users)
        ]
        groups = []
        for g in range(args.groups):
            members = [{"value": u, "type": "User"} for u in rng.sample(users, args.members)]
            groups.append(
                call(
                    "create group",
                    "POST",
                    "/Groups",
                    {"schemas": [GROUP], "displayName": f"g{g}", "members": members},
                )["id"]
            )
        push_s = time.perf_counter() - started
        for _ in range(args.changes):
            group, user = rng.choice(groups), rng.choice(users)
            add = {"op": "add", "path": "members", "value": [{"value": user, "type": "User"}]}
            call(
                "add member", "PATCH", f"/Groups/{group}", {"schemas": [PATCH], "Operations": [add]}
            )
            remove = {"op": "remove", "path": f'members[value eq "{user}"]'}
            call(
                "remove member",
                "PATCH",
                f"/Groups/{group}",
                {"schemas": [PATCH], "Operations": [remove]},
            )
        grants = (
            subprocess.run(
                [*SVC, "policy", "--db", db, "list", "--tenant", "default"],
                capture_output=True,
                text=True,
            ).stdout.count("\ng, ")
            + 1
        )
    finally:
        for client in clients:
            client.close()
        child.terminate()
        child.wait(timeout=60)
        log.close()
    return {
        "machine": machine(),
        "users": args.users,
        "groups": args.groups,
        "members_per_group": args.members,
        "first_push_s": round(push_s, 1),
        "operations": {kind: summary(t) for kind, t in times.items() if t},
        "grants": grants,
        "policy_db_mb": round((work / "policy.db").stat().st_size / 2**20, 1),
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--users", type=int, default=5000)
    p.add_argument("--groups", type=int, default=500)
    p.add_argument("--members", type=int, default=20)
    p.add_argument("--changes", type=int, default=200)
    p.add_argument("--port", type=int, default=18765)
    args = p.parse_args(argv)
    result = main(args)
    print_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
