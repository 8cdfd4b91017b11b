"""Metrics of several worker processes (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrieval_svc.metrics import MULTIPROCESS_ENV, exposition_registry

WORKER = """
import os, sys
from retrieval_svc.metrics import Metrics
Metrics().policy_loaded.set(1234.0)
print(os.getpid(), flush=True)
if sys.argv[1] == "live":
    sys.stdin.read()  # until the test closes it
"""


def loaded_pids(text: str) -> set[str]:
    return {
        s.labels["pid"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rsvc_policy_loaded_timestamp_seconds"
    }


def test_a_worker_that_is_gone_drops_out_of_the_per_worker_gauges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, MULTIPROCESS_ENV: str(tmp_path)}
    # One worker ends without cleaning up (as one killed by uvicorn's supervisor would) …
    gone = subprocess.run(
        [sys.executable, "-c", WORKER, "gone"], env=env, capture_output=True, text=True
    )
    assert gone.returncode == 0, gone.stderr
    gone_pid = gone.stdout.strip()
    assert (tmp_path / f"gauge_liveall_{gone_pid}.db").exists()
    # … while another is still running.
    with subprocess.Popen(
        [sys.executable, "-c", WORKER, "live"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as live:
        assert live.stdin is not None and live.stdout is not None
        live_pid = live.stdout.readline().strip()
        monkeypatch.setenv(MULTIPROCESS_ENV, str(tmp_path))
        text = generate_latest(exposition_registry(CollectorRegistry())).decode()
        live.stdin.close()  # the worker ends; the context waits for it
    assert loaded_pids(text) == {live_pid}
    assert not (tmp_path / f"gauge_liveall_{gone_pid}.db").exists()
    assert any(tmp_path.glob(f"counter_{gone_pid}.db"))  # its counts still add up
