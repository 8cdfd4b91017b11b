"""`retrieval-svc serve --workers 2`: both processes serve, metrics add up across them, and a
policy change reaches every worker (issue #17)."""

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
from tests.support.corpus import SAMPLES_KB
from tests.support.live import live_service, serve_env

POLICY = "p, anyone, acme, *, read\n"
POWER = "配电房设备参数与操作规程"  # for 运维工程师 and 物业经理
KEY = KEYS["anon"]


def samples(text: str, name: str, labels: dict[str, str]) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def policy_loaded(text: str) -> dict[str, float]:
    """pid → when that worker loaded the policy in force."""
    return {
        s.labels["pid"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rsvc_policy_loaded_timestamp_seconds"
    }


class Service:
    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder

    def metrics(self) -> str:
        resp = httpx.get(f"{self.url}/metrics", timeout=30)
        assert resp.status_code == 200
        return resp.text

    def wait_for_workers(self, count: int, *, loaded_after: float = 0.0) -> dict[str, float]:
        """Wait (on a slow machine, long) until ``count`` live workers have loaded the policy,
        each after ``loaded_after``. The service answers once one worker is up; the other may
        still be starting, or be replaced (uvicorn's supervisor kills a worker that misses its
        health checks), and a worker that starts after a policy change loads the new policy
        without a reload: counting reloads alone could wait for ever."""
        deadline = time.monotonic() + 180
        while True:
            loaded = policy_loaded(self.metrics())
            if len(loaded) == count and all(t >= loaded_after for t in loaded.values()):
                return loaded
            assert time.monotonic() < deadline, f"workers' policies loaded at: {loaded}"
            time.sleep(0.2)

    def titles(self, user: str) -> set[str]:
        body = {
            "knowledge_id": SAMPLES_KB,
            "query": "配电房倒闸操作",
            "retrieval_setting": {"top_k": 10, "score_threshold": 0},
            "metadata_condition": {
                "conditions": [{"name": "user_id", "comparison_operator": "is", "value": user}]
            },
        }
        # A new connection each time, so the kernel may hand it to either worker.
        resp = httpx.post(
            f"{self.url}/retrieval",
            json=body,
            headers={"Authorization": f"Bearer {KEY}", "Connection": "close"},
            timeout=30,
        )
        assert resp.status_code == 200, resp.text
        return {r["title"] for r in resp.json()["records"]}


@pytest.fixture
def service(corpus: str, tmp_path: Path) -> Iterator[Service]:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"name": "anon", "sha256": hash_key(KEY), "tenant": "acme"}]))
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY, encoding="utf-8")
    folder = tmp_path / "multiproc"
    env = serve_env(
        corpus,
        keys,
        RSVC_CASBIN_POLICY=str(policy),
        RSVC_POLICY_CHECK_INTERVAL_S="0.2",
        PROMETHEUS_MULTIPROC_DIR=str(folder),
    )
    with live_service(env, tmp_path, "--workers", "2") as (url, _child):
        service = Service(url, folder)
        service.wait_for_workers(2)
        yield service


def test_two_workers_serve_and_their_metrics_add_up(service: Service) -> None:
    for _ in range(40):
        assert POWER not in service.titles("li")
    # Both processes wrote values: one file per process and metric type.
    pids = {f.stem.rsplit("_", 1)[-1] for f in service.folder.glob("counter_*.db")}
    assert len(pids) >= 2, sorted(service.folder.iterdir())
    text = service.metrics()  # one worker answers, for both
    assert samples(text, "rsvc_http_requests_total", {"route": "/retrieval"}) == 40
    assert samples(text, "rsvc_chunks_returned_total", {"source_type": "rag"}) > 0


def test_a_policy_change_reaches_every_worker(service: Service, tmp_path: Path) -> None:
    assert POWER not in service.titles("li")
    changed = time.time()
    policy = tmp_path / "policy.csv"
    policy.write_text(POLICY + "g, user:li, 运维工程师, acme\n", encoding="utf-8")
    os.utime(policy, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    service.wait_for_workers(2, loaded_after=changed)  # the same two, each reloaded
    assert samples(service.metrics(), "rsvc_policy_reloads_total", {"outcome": "ok"}) >= 2
    assert all(POWER in service.titles("li") for _ in range(20))  # whichever worker answers


def test_a_killed_worker_is_replaced_and_its_series_dropped(service: Service) -> None:
    before = service.wait_for_workers(2)
    victim = int(min(before))
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 180
    while str(victim) in policy_loaded(service.metrics()):
        assert time.monotonic() < deadline, "the killed worker is still listed"
        time.sleep(0.2)
    after = service.wait_for_workers(2)  # its replacement, with the policy loaded
    assert str(victim) not in after and set(before) & set(after)
    assert all(POWER not in service.titles("li") for _ in range(10))


def test_fifty_policy_changes_under_load_reach_every_worker_in_time(
    service: Service, tmp_path: Path
) -> None:
    # Issue #36 §8: a revoke once reached retrieval after 5-9 s (the first change waited for
    # its compiler to be spawned), later ones in 0.2 s. Fifty changes while requests run; the
    # lag of each is read from every worker's own rsvc_policy_loaded_timestamp_seconds.
    import threading

    stop, served = threading.Event(), [0]

    def load() -> None:  # bounded: it stops with the test, or after 20,000 requests
        while not stop.is_set() and served[0] < 20_000:
            service.titles("li")
            served[0] += 1

    runner = threading.Thread(target=load, daemon=True)
    runner.start()
    policy, lags = tmp_path / "policy.csv", []
    try:
        for i in range(50):
            text = POLICY + ("g, user:li, 运维工程师, acme\n" if i % 2 == 0 else "")
            changed = time.time()
            staged = tmp_path / "policy.csv.new"  # swapped in whole, as a ConfigMap is
            staged.write_text(text, encoding="utf-8")
            os.utime(staged, ns=(time.time_ns(), time.time_ns() + (i + 1) * 1_000_000_000))
            os.replace(staged, policy)
            loaded = service.wait_for_workers(2, loaded_after=changed)
            lags.extend(t - changed for t in loaded.values())
    finally:
        stop.set()
        runner.join(timeout=60)
    assert served[0] > 0 and len(lags) == 100
    worst = max(lags)
    # The promise: within RSVC_POLICY_CHECK_INTERVAL_S (0.2 s here) plus the compile; 2 s is
    # the documented default interval, ten times this one, and room for a busy machine.
    assert worst < 2.0, sorted(round(lag, 2) for lag in lags)[-10:]
    assert (POWER in service.titles("li")) is False  # the last change (a revoke) is in force
