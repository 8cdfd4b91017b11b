"""Nothing left behind (issue #24 item 8): the policy compiler's child process and
multiprocessing's resource tracker go when the service goes — stopped with SIGTERM, or
killed with SIGKILL as uvicorn's supervisor kills a worker that misses its health checks."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from retrieval_svc.auth.keys import hash_key
from tests.support import KEYS
from tests.support.live import live_service, serve_env


def children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def reloads(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rsvc_policy_reloads_total" and s.labels.get("outcome") == "ok"
    )


@pytest.fixture
def service(corpus: str, tmp_path: Path) -> Iterator[tuple[int, set[int]]]:
    """A service whose policy was changed once (so its compiler child runs); its pid and its
    child processes then."""
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps([{"name": "anon", "sha256": hash_key(KEYS["anon"]), "tenant": "acme"}])
    )
    policy = tmp_path / "policy.csv"
    policy.write_text("p, anyone, *, *, read\n", encoding="utf-8")
    env = serve_env(
        corpus, keys, RSVC_CASBIN_POLICY=str(policy), RSVC_POLICY_CHECK_INTERVAL_S="0.2"
    )
    with live_service(env, tmp_path) as (url, child):
        policy.write_text("p, anyone, *, *, read\ng, user:li, 巡检员, default\n", "utf-8")
        os.utime(policy, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
        deadline = time.monotonic() + 120
        while reloads(url) < 1:
            assert time.monotonic() < deadline, "the policy was not reloaded"
            time.sleep(0.2)
        helpers = children(child.pid)
        assert len(helpers) >= 2, helpers  # the compiler and the resource tracker
        yield child.pid, helpers


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_helpers_go_with_the_service(service: tuple[int, set[int]], how: signal.Signals) -> None:
    pid, helpers = service
    os.kill(pid, how)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in helpers):
        assert time.monotonic() < deadline, f"left behind: {[p for p in helpers if alive(p)]}"
        time.sleep(0.1)
