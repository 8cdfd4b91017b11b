"""The benchmark's verdicts and CPU accounting (pure functions over a run's numbers)."""

from __future__ import annotations

from typing import Any

from bench.query import report
from bench.query.corpus import Query
from bench.query.cpu import CpuMeter
from bench.query.rounds import same_share
from bench.query.scenarios import TEXT_FIELDS, Prepared
from retrieval_svc.settings import Settings


def _row(p50: float, qps: float, cpu: dict[str, float] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"p50_ms": p50, "p95_ms": p50, "p99_ms": p50, "qps": qps}
    if cpu is not None:
        row["cpu_ms_per_request"] = cpu
    return row


def _result(chunks: int, raw: tuple[float, float], service: tuple[float, float]) -> dict[str, Any]:
    cpu_raw = {"elasticsearch": 19.0, "service": 0.0, "load_generator": 0.4}
    cpu_svc = {"elasticsearch": 19.0, "service": 1.2, "load_generator": 0.4}
    scen = {
        "raw": {"1": _row(raw[0], 50), "16": _row(20, raw[1], cpu_raw)},
        "service": {"1": _row(service[0], 40), "16": _row(25, service[1], cpu_svc)},
        "service_web": {"1": _row(85, 10), "16": _row(100, 50)},
    }
    return {"chunks": chunks, "queries": 10, "scenarios": scen}


def _verdicts(result: dict[str, Any]) -> dict[str, bool]:
    return {t["target"]: t["met"] for t in report.targets(result)}


def test_issue_17_targets_at_100k() -> None:
    met = _verdicts(_result(100_000, raw=(17.0, 100.0), service=(18.9, 95.0)))
    assert met["service QPS at concurrency 16 ≥ 0.95 × raw (100,000 chunks)"]
    assert met["service p50 ≤ raw p50 + 2 ms, concurrency 1 (100,000 chunks)"]
    missed = _verdicts(_result(100_000, raw=(17.0, 100.0), service=(19.1, 94.9)))
    assert not missed["service QPS at concurrency 16 ≥ 0.95 × raw (100,000 chunks)"]
    assert not missed["service p50 ≤ raw p50 + 2 ms, concurrency 1 (100,000 chunks)"]


def test_the_10k_target_comes_from_the_scaling_rows() -> None:
    result = _result(100_000, raw=(17.0, 100.0), service=(18.0, 96.0))
    result["scaling"] = [
        {
            "chunks": 10_000,
            "raw_p50_ms": 4.0,
            "service_p50_ms": 5.5,
            "raw_qps16": 500.0,
            "service_qps16": 390.0,
        }
    ]
    met = _verdicts(result)
    assert not met["service QPS at concurrency 16 ≥ 0.8 × raw (10,000 chunks)"]
    result["scaling"][0]["service_qps16"] = 400.0
    assert _verdicts(result)["service QPS at concurrency 16 ≥ 0.8 × raw (10,000 chunks)"]


def test_a_smoke_run_has_no_size_targets() -> None:
    names = _verdicts(_result(2_000, raw=(2.0, 800.0), service=(3.0, 500.0)))
    assert not [n for n in names if "chunks)" in n]


def test_cpu_table_bounds_the_ratio_by_the_totals() -> None:
    lines = report.cpu_table(_result(100_000, (17.0, 100.0), (18.0, 95.0))["scenarios"])
    text = "\n".join(lines)
    assert "| 19.0 | 1.2 | 0.4 | 20.600 |" in text
    assert f"at most about {19.4 / 20.6:.2f}" in text


def test_cpu_per_request_divides_each_part() -> None:
    got = CpuMeter.per_request((10.0, 2.0, 1.0), (12.0, 2.5, 1.1), 100)
    assert got == {"elasticsearch": 20.0, "service": 5.0, "load_generator": 1.0}


def test_same_share_counts_identical_orders_only() -> None:
    assert same_share([["a", "b"], ["c"]], [["a", "b"], ["c"]]) == 1.0
    assert same_share([["a", "b"], ["c"]], [["b", "a"], ["c"]]) == 0.5


def test_raw_sends_the_services_default_text_fields() -> None:
    assert TEXT_FIELDS == Settings.model_fields["bm25_fields"].default
    query = Query("空调 维修", ["r1"], None, "none", [])
    body = Prepared(query, frozenset({"r1"}), []).body()
    should = body["query"]["bool"]["must"][0]["bool"]["should"]
    fields = {next(iter(clause["match"])) for clause in should}
    assert fields == {"content", "content_seg", "document_title"}  # "both"


def _markdown(**extra: Any) -> str:
    """The report of a 100k run (service at 0.96x raw) with ``extra`` sections."""
    result = _result(100_000, raw=(17.0, 100.0), service=(18.0, 96.0))
    result.update(
        machine="test",
        workaround_recall_at_10=1.0,
        ratios={"service_over_raw_p50": 1.06, "service_over_raw_qps16": 0.96},
        **extra,
    )
    result["targets"] = report.targets(result)
    return report.markdown(result)


def test_separate_cores_table() -> None:
    separate = {"raw": {"qps": 300.0}, "service": {"qps": 270.0}, "dify": {"qps": 297.0}}
    text = _markdown(separate_cores=[{"chunks": 10_000, **separate}])
    assert "| 10,000 | 300.0 | 270.0 | 297.0 | 0.90 | 0.99 |" in text


def test_hop_table() -> None:
    floor = {
        "raw": {"qps": 500.0, "cpu_ms_per_request": {"service": 0.01}},
        "hop": {"qps": 420.0, "cpu_ms_per_request": {"service": 0.61}},
        "service": {"qps": 350.0, "cpu_ms_per_request": {"service": 1.2}},
        "hop_same_as_raw": 1.0,
    }
    text = _markdown(hop=[{"chunks": 10_000, **floor}])
    assert "| 10,000 | 500.0 | 420.0 | 350.0 | 0.84 | 0.70 | 0.61 | 1.2 |" in text
    assert "| 10,000 | 500.0 |" not in _markdown()  # no --hop, no table


def test_separate_cores_pins_every_thread_and_restores() -> None:
    import os
    import subprocess
    import sys

    from bench.query.cpu import SeparateCores

    es, service = (
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)
    )
    before = os.sched_getaffinity(0)
    try:
        with SeparateCores(es.pid, [service.pid]):
            assert os.sched_getaffinity(es.pid) == {0}
            assert os.sched_getaffinity(service.pid) == {1}
            assert os.sched_getaffinity(0) == {1}
        assert os.sched_getaffinity(es.pid) == before
        assert os.sched_getaffinity(service.pid) == before
        assert os.sched_getaffinity(0) == before
    finally:
        for child in (es, service):
            child.kill()
            child.wait()
