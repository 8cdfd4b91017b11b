"""``python -m bench.smb [--files N] [--per-folder K] [--dc-env PATH] [--smoke]``: what reading
every file's DACL adds to listing an SMB share (issue #67 §6).

N files (default 100,000) in folders of K are written straight onto the disk of the share's
folder on a Samba AD DC on loopback (the server serves a local folder, so this takes seconds,
not an hour of SMB writes), then the share is walked over SMB 2/3 by ``SmbSource`` twice:
the listing alone (each folder's directory query; the descriptor read replaced by nothing)
and the listing with every file's security descriptor (one compound create/query-info/close
per file, as ``index smb://`` reads it). The DACLs' share of the cost is the difference.
Files written on disk carry no NT ACL of their own: Samba computes each descriptor from the
folder's, as it does for any file without one (reading a stored one is the same round trip).

``--smoke``: 500 files (seconds; not run in CI). Needs root for a DC of its own (an address
on ``lo``); ``--dc-env`` reads one already running (its ``dc.env``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness import finish, machine, parser
from bench.smb.dc import domain_controller
from indexer.sources import ObjectRef
from indexer.sources.smb import SmbCredentials, SmbSource


class _ListingOnly(SmbSource):
    """The share as listed, without reading any file's descriptor."""

    def _dacl(self, key: str) -> str:  # noqa: ARG002
        return "(not read)"


def fill(share_path: Path, files: int, per_folder: int) -> str:
    """``files`` small Markdown files in folders of ``per_folder`` under the share's folder on
    disk (kept between runs); the folder's name in the share."""
    name = f"bench-{files}-{per_folder}"
    top = share_path / name
    done = top / ".filled"
    if done.exists():
        return name
    for i in range(files):
        folder = top / f"部门{i // per_folder:04d}"
        if i % per_folder == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"文件{i:06d}.md").write_text(f"# 文件 {i}\n\n内容 {i}。\n", encoding="utf-8")
    done.write_text("", encoding="utf-8")
    return name


def walk(source: SmbSource) -> tuple[float, int, int]:
    """The seconds to list ``source`` whole, the files listed, the listing's failures."""
    started = time.perf_counter()
    listed: Iterator[ObjectRef] = source.list()
    count = sum(1 for _ in listed)
    seconds = time.perf_counter() - started
    source.close()
    return seconds, count, len(source.failures)


def measure(env: dict[str, str], files: int, per_folder: int) -> dict[str, Any]:
    started = time.perf_counter()
    name = fill(Path(env["SAMBA_AD_SHARE_PATH"]), files, per_folder)
    filled_s = time.perf_counter() - started
    url = f"smb://{env['SAMBA_AD_ADDRESS']}/{env['SAMBA_AD_SHARE']}/{name}"
    creds = SmbCredentials(
        f"{env['SAMBA_AD_DOMAIN']}\\Administrator", env["SAMBA_AD_ADMIN_PASSWORD"], "ntlm"
    )
    alone_s, alone_n, alone_failed = walk(_ListingOnly(url, creds))
    dacl_s, dacl_n, dacl_failed = walk(SmbSource(url, creds))
    again_s, _, _ = walk(_ListingOnly(url, creds))  # (the listing alone, warm, after)
    listing_s = min(alone_s, again_s)
    return {
        "files": files,
        "per_folder": per_folder,
        "filled_on_disk_s": round(filled_s, 1),
        "listing_alone_s": round(listing_s, 2),
        "listing_alone_runs_s": [round(alone_s, 2), round(again_s, 2)],
        "listing_with_dacls_s": round(dacl_s, 2),
        "listed": [alone_n, dacl_n],
        "failures": [alone_failed, dacl_failed],
        "ms_per_file_listing": round(1000 * listing_s / max(1, alone_n), 3),
        "ms_per_file_with_dacls": round(1000 * dacl_s / max(1, dacl_n), 3),
        "dacl_share_of_cost": round((dacl_s - listing_s) / dacl_s, 3) if dacl_s else None,
    }


def table(result: dict[str, Any]) -> str:
    r = result["listing"]
    return "\n".join(
        [
            "| files | listing alone | listing + DACLs | per file (alone / with DACLs) "
            "| DACLs' share |",
            "|---|---|---|---|---|",
            f"| {r['files']:,} | {r['listing_alone_s']} s | {r['listing_with_dacls_s']} s | "
            f"{r['ms_per_file_listing']} / {r['ms_per_file_with_dacls']} ms | "
            f"{100 * (r['dacl_share_of_cost'] or 0):.0f}% |",
        ]
    )


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__, "python -m bench.smb")
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--per-folder", type=int, default=1_000)
    p.add_argument("--dc-env", type=Path, default=None, help="a running DC's dc.env")
    p.add_argument("--smoke", action="store_true", help="500 files")
    args = p.parse_args(argv)
    files = 500 if args.smoke else args.files
    with domain_controller(args.dc_env) as env:
        listing = measure(env, files, min(args.per_folder, files))
    result = {"machine": machine(), "listing": listing}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.md").write_text(table(result) + "\n", encoding="utf-8")
    print(table(result))
    return finish(result, args.out)
