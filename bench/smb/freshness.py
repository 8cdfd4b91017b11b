"""``python -m bench.smb.freshness [--files N] [--changes K] [--rescan S] [--dc-env PATH]``:
how long until a change made on a Windows share is in force, with ``retrieval-indexer watch
smb://…`` running (issue #67 §4).

Changes, made through the share as an administrator does them, one at a time, each timed from
the moment the server answered it until the index agrees with the server (the service reads
those fields on every request, so that is when every answer agrees):

* ``dacl`` — a file's DACL replaced with ``smbcacls --set`` (Explorer's way), open to every
  signed-in person → only 财务部: agreed when the file's chunks hold 财务部's SID and no
  longer Authenticated Users'. Samba 4.17 sends no CHANGE_NOTIFY for a security change, so
  this arrives with the watcher's re-listing (``--rescan``); a Windows server sends one.
* ``move`` — a file renamed into the restricted folder (it keeps its own ACL, as on NTFS):
  narrowing agreed when its old name has left the index, the whole when its new name is there.

The tree: N files in ``公开/`` (Authenticated Users read) and ``财务/`` (财务部 only).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from bench.harness import finish, machine, parser
from bench.smb.dc import domain_controller
from retrieval_svc.words import say

AUTHENTICATED_USERS = "S-1-5-11"


def _role(sid: str) -> str:
    return f"sid:{sid}"


class Share:
    """The DC's share through smbclient/smbcacls, as its administrator."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.base = [
            "-s", env["SAMBA_AD_SMB_CONF"], f"//{env['SAMBA_AD_ADDRESS']}/{env['SAMBA_AD_SHARE']}",
            "-U", f"Administrator%{env['SAMBA_AD_ADMIN_PASSWORD']}",
        ]  # fmt: skip

    def smbclient(self, *commands: str) -> None:
        subprocess.run(["smbclient", *self.base, "-c", "; ".join(commands)],
                       capture_output=True, check=True, timeout=120)  # fmt: skip

    def acl(self, path: str, *aces: str) -> None:
        subprocess.run(["smbcacls", *self.base[:2], self.base[2], path, *self.base[3:],
                        "--set", ",".join(aces)], capture_output=True, check=True,
                       timeout=120)  # fmt: skip


def group_sid(env: dict[str, str], name: str) -> str:
    done = subprocess.run(
        ["samba-tool", "group", "show", name, "--attributes=objectSid", "-s",
         env["SAMBA_AD_SMB_CONF"]], capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("objectSid:"):
            return line.split(":", 1)[1].strip()
    subprocess.run(["samba-tool", "group", "add", name, "-s", env["SAMBA_AD_SMB_CONF"]],
                   capture_output=True, check=True, timeout=120)  # fmt: skip
    return group_sid(env, name)


def build(share: Share, root: str, files: int, group: str) -> None:
    domain = share.env["SAMBA_AD_DOMAIN"]
    admins = "ACL:BUILTIN\\Administrators:ALLOWED/OI|CI/FULL"
    share.smbclient(f'mkdir "{root}"', f'mkdir "{root}/公开"', f'mkdir "{root}/财务"')
    share.acl(f"{root}/公开", admins, "ACL:NT AUTHORITY\\Authenticated Users:ALLOWED/OI|CI/READ")
    share.acl(f"{root}/财务", admins, f"ACL:{domain}\\{group}:ALLOWED/OI|CI/READ")
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "f.md"
        puts = []
        for i in range(files):
            folder = "财务" if i % 10 == 0 else "公开"
            local.write_text(f"# 文件 {i}\n\n内容 {i}。\n", encoding="utf-8")
            puts.append(f'put "{local}" "{root}/{folder}/文件{i:05d}.md"')
        for i in range(0, len(puts), 200):
            share.smbclient(*puts[i : i + 200])


def stored(es: Elasticsearch, alias: str, name: str) -> set[str] | None:
    """The roles the index holds for document ``name`` (None: not in the index)."""
    found = es.options(ignore_status=(404, 503)).search(
        index=f"{alias}.*", query={"term": {"document_name": name}}, size=1,
        source_includes=["access_roles"],
    )  # fmt: skip
    hits = found.body.get("hits", {}).get("hits", [])
    return set(hits[0]["_source"].get("access_roles") or ()) if hits else None


def wait(check: Any, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 2)


def measure(
    env: dict[str, str], es_url: str, files: int, changes: int, rescan: int
) -> dict[str, Any]:
    share, group = Share(env), "财务部"
    finance = _role(group_sid(env, group))
    root = f"新鲜度-{uuid.uuid4().hex[:6]}"
    build(share, root, files, group)
    alias = f"rsvc-bench-smb-{uuid.uuid4().hex[:8]}"
    es = Elasticsearch(es_url, request_timeout=30)
    environ = {
        **os.environ, "RSVC_ES_URL": es_url, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none",
        "RSVC_SMB_USER": f"{env['SAMBA_AD_DOMAIN']}\\Administrator",
        "RSVC_SMB_PASSWORD": env["SAMBA_AD_ADMIN_PASSWORD"], "RSVC_SMB_AUTH": "ntlm",
    }  # fmt: skip
    url = f"smb://{env['SAMBA_AD_ADDRESS']}/{env['SAMBA_AD_SHARE']}/{root}"
    log = Path(tempfile.mkstemp(suffix=".log")[1])
    watcher = subprocess.Popen(
        [sys.executable, "-c", "from indexer.cli import app; app()", "watch", url,
         "--knowledge-id", "新鲜度", "--rescan", str(rescan), "--health-port", "0"],
        env=environ, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    windows: dict[str, list[float]] = {"dacl": [], "move_narrowed": [], "move_whole": []}
    missed = 0
    try:
        started = time.monotonic()
        last = f"{'公开' if (files - 1) % 10 else '财务'}/文件{files - 1:05d}.md"
        if wait(lambda: stored(es, alias, last) is not None, 3600) is None:
            raise SystemExit(say("bench_share_never_indexed", log=log.read_text()[-2000:]))
        first_index_s = time.monotonic() - started
        public = [i for i in range(files) if i % 10][: 2 * changes]
        for n, i in enumerate(public[:changes]):
            name = f"公开/文件{i:05d}.md"
            share.acl(f"{root}/{name}", "ACL:BUILTIN\\Administrators:ALLOWED/0x0/FULL",
                      f"ACL:{env['SAMBA_AD_DOMAIN']}\\{group}:ALLOWED/0x0/READ")  # fmt: skip
            took = wait(lambda name=name: (r := stored(es, alias, name)) is not None
                        and finance in r and _role(AUTHENTICATED_USERS) not in r,
                        4 * rescan + 60)  # fmt: skip
            windows["dacl"].append(took) if took is not None else None
            missed += took is None
            print(say("bench_dacl", n=n, took=took), file=sys.stderr)
        for n, i in enumerate(public[changes:]):
            old, new = f"公开/文件{i:05d}.md", f"财务/移入{i:05d}.md"
            share.smbclient(f'rename "{root}/{old}" "{root}/{new}"')
            t0 = time.monotonic()
            narrowed = wait(lambda old=old: stored(es, alias, old) is None, 4 * rescan + 60)
            whole = wait(lambda new=new: stored(es, alias, new) is not None, 4 * rescan + 60)
            if narrowed is None or whole is None:
                missed += 1
            else:
                windows["move_narrowed"].append(narrowed)
                windows["move_whole"].append(time.monotonic() - t0)
            print(say("bench_move", n=n, narrowed=narrowed, whole=whole), file=sys.stderr)
    finally:
        watcher.terminate()
        watcher.wait(timeout=120)
        es.options(ignore_status=404).indices.delete(index=f"{alias}.*")
        es.close()
    return {
        "files": files,
        "rescan_s": rescan,
        "first_index_s": round(first_index_s, 1),
        "missed": missed,
        **{
            kind: {"n": len(v), "p50_s": pct(v, 50), "p95_s": pct(v, 95),
                   "max_s": round(max(v), 2) if v else None,
                   "mean_s": round(statistics.fmean(v), 2) if v else None}
            for kind, v in windows.items()
        },
    }  # fmt: skip


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__, "python -m bench.smb.freshness")
    p.add_argument("--files", type=int, default=1_000)
    p.add_argument("--changes", type=int, default=20)
    p.add_argument("--rescan", type=int, default=10)
    p.add_argument("--dc-env", type=Path, default=None, help="a running DC's dc.env")
    args = p.parse_args(argv)
    with domain_controller(args.dc_env) as env:
        fresh = measure(env, args.es_url, args.files, args.changes, args.rescan)
    return finish({"machine": machine(), "freshness": fresh}, args.out)


if __name__ == "__main__":
    sys.exit(cli())
