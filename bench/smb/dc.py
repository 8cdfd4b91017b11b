"""The domain controller a benchmark reads: one already running (``--dc-env``: the
``dc.env`` scripts/samba-ad.sh wrote) or one it starts and stops itself."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from bench.harness import ROOT
from retrieval_svc.words import say

SCRIPT = ROOT / "scripts" / "samba-ad.sh"


def _read_env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@contextlib.contextmanager
def domain_controller(env_file: Path | None) -> Iterator[dict[str, str]]:
    """The DC's ``KEY=value`` lines (address, share, its folder on disk, the administrator)."""
    if env_file is not None:
        yield _read_env(env_file.read_text(encoding="utf-8"))
        return
    done = subprocess.run(
        [str(SCRIPT), "start"], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        raise SystemExit(say("bench_samba_failed", stderr=done.stderr))
    env = _read_env(done.stdout)
    try:
        yield env
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", env["SAMBA_AD_ADDRESS"]], capture_output=True, timeout=300,
            check=False,
        )  # fmt: skip
