"""Prometheus metrics, one registry per app.

Labels are bounded: route templates, methods, status codes, providers, outcomes and error
classes — never a query, a key, a user id or a raw path.

With several worker processes (``retrieval-svc serve --workers N``) prometheus-client's
multiprocess mode is on (``PROMETHEUS_MULTIPROC_DIR``, set by ``serve``): every process writes
its values to files there, and an exposition adds them up across processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    push_to_gateway,
    write_to_textfile,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from retrieval_svc import __version__
from retrieval_svc.chunks import UnifiedChunk

LATENCY_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
LAG_TICK_S = 0.1  # how often the event loop's lag is sampled
LAG_WINDOW_S = 30.0  # the gauge holds the largest lag of this window (longer than a scrape)


def multiprocess() -> bool:
    """Whether this process is one of several (prometheus-client's multiprocess mode)."""
    return bool(os.environ.get(MULTIPROCESS_ENV))


def exposition_registry(registry: CollectorRegistry) -> CollectorRegistry:
    """What an exposition reads: ``registry``, or every process's values in multiprocess mode."""
    if not multiprocess():
        return registry
    forget_dead_processes(Path(os.environ[MULTIPROCESS_ENV]))
    merged = CollectorRegistry()
    MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
    return merged


def forget_dead_processes(folder: Path) -> None:
    """Drop the per-process gauges of processes that are gone, however they ended: a worker
    killed by uvicorn's supervisor (for missed health checks) cannot clean up after itself,
    and would go on being shown beside its replacement."""
    for path in folder.glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            mark_process_dead(int(pid), str(folder))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    return True


class Metrics:
    """The service's metric families."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        Gauge(
            "rsvc_build_info",
            "Version of the running service.",
            ["version"],
            registry=r,
            multiprocess_mode="max",
        ).labels(version=__version__).set(1)
        self.requests = Counter(
            "rsvc_http_requests_total",
            "HTTP requests, by route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "rsvc_http_request_duration_seconds",
            "HTTP request latency, by route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.es_seconds = Histogram(
            "rsvc_elasticsearch_request_duration_seconds",
            "Elasticsearch call latency, by operation and outcome (ok or the error class).",
            ["operation", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.web_seconds = Histogram(
            "rsvc_web_search_duration_seconds",
            "Web search latency, by provider and outcome (ok, cached, timeout, error).",
            ["provider", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.chunks_returned = Counter(
            "rsvc_chunks_returned_total",
            "Chunks returned to callers, by source (rag, web).",
            ["source_type"],
            registry=r,
        )
        self.acl_postcheck_drops = Counter(
            "rsvc_acl_postcheck_drops_total",
            "Hits that passed the Elasticsearch ACL clause but failed the Python re-check (a bug).",
            registry=r,
        )
        self.policy_reloads = Counter(
            "rsvc_policy_reloads_total",
            "Casbin policy reloads after a file change, by outcome (ok, error).",
            ["outcome"],
            registry=r,
        )
        self.unknown_principals = Counter(
            "rsvc_unknown_principals_total",
            "Requests whose user id resolved to no one (unknown) or to more than one person "
            "(ambiguous), by API key: served as anonymous, or refused where the key says so.",
            ["key", "status"],
            registry=r,
        )
        self.policy_lines_skipped = Gauge(
            "rsvc_policy_lines_skipped",
            "Stored policy lines the policy in force leaves out because they mean nothing (each "
            "a grant not given; `retrieval-svc policy check` lists them).",
            registry=r,
            multiprocess_mode="max",
        )
        self.policy_loaded = Gauge(
            "rsvc_policy_loaded_timestamp_seconds",
            "When the access policy in force was loaded, in Unix time (with --workers, one "
            "series per worker process, labelled pid).",
            registry=r,
            multiprocess_mode="liveall",
        )
        self.oidc_key_fetches = Counter(
            "rsvc_oidc_key_fetches_total",
            "Fetches of the OpenID Connect provider's signing keys, by outcome (ok, error).",
            ["outcome"],
            registry=r,
        )
        self.auth_failures = Counter(
            "rsvc_auth_failures_total",
            "Requests refused for authentication or authorization, by reason.",
            ["reason"],
            registry=r,
        )
        self.refusals = Counter(
            "rsvc_refusals_total",
            "Requests refused (4xx) on the retrieval routes and MCP, by route template, API "
            "key (- when no key matched) and reason (a fixed list: docs/operations.md). Dify's "
            "knowledge path shows a refusal as an empty answer: this is where it is seen.",
            ["route", "key", "reason"],
            registry=r,
        )
        self.embedding_failures = Counter(
            "rsvc_embedding_failures_total",
            "Query embeddings that failed (hybrid answered with BM25 only; vector with 503).",
            registry=r,
        )
        self.embedding_failures.inc(0)
        self.rerank_seconds = Histogram(
            "rsvc_rerank_duration_seconds",
            "Reranking latency, by outcome (ok, timeout, error).",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.audit_events = Counter(
            "rsvc_audit_events_total",
            "Audit events, by outcome: queued, written, dropped (queue full), failed (not "
            "written: the cluster refused or was away).",
            ["outcome"],
            registry=r,
        )
        for outcome in ("queued", "written", "dropped", "failed"):
            self.audit_events.labels(outcome=outcome)
        self.event_loop_lag = Gauge(
            "rsvc_event_loop_lag_seconds",
            "The longest the event loop was late to wake a timer in the last "
            f"{LAG_WINDOW_S:.0f} s: how long one request held everyone (the worst worker).",
            registry=r,
            multiprocess_mode="max",
        )
        for source in ("rag", "web"):
            self.chunks_returned.labels(source_type=source)
        self.acl_postcheck_drops.inc(0)

    def count_chunks(self, chunks: Iterable[UnifiedChunk]) -> None:
        """Count chunks leaving the service, by source."""
        counts = {"rag": 0, "web": 0}
        for chunk in chunks:
            counts[chunk.source_type] += 1
        for source, n in counts.items():
            if n:
                self.chunks_returned.labels(source_type=source).inc(n)

    def exposition(self) -> bytes:
        """The text exposition of every metric (of all worker processes)."""
        return bytes(generate_latest(exposition_registry(self.registry)))


async def watch_event_loop(gauge: Gauge, tick_s: float = LAG_TICK_S) -> None:
    """Sample, forever, how late the event loop wakes a timer, and keep ``gauge`` at the
    largest lateness of the last ``LAG_WINDOW_S``: a request that holds the loop (parsing,
    a compile, a blocking call) shows up here even when the stall fell between two scrapes."""
    recent: deque[tuple[float, float]] = deque()
    while True:
        asked = time.monotonic()
        await asyncio.sleep(tick_s)
        now = time.monotonic()
        recent.append((now, max(0.0, now - asked - tick_s)))
        while recent[0][0] < now - LAG_WINDOW_S:
            recent.popleft()
        gauge.set(max(lag for _, lag in recent))


def publish(
    registry: CollectorRegistry,
    *,
    textfile: Path | None,
    pushgateway: str | None,
    job: str,
    grouping: dict[str, str],
) -> None:
    """A batch job's metrics (it has no /metrics to scrape): written to a node-exporter
    textfile and/or pushed to a Pushgateway under ``job`` and ``grouping``."""
    if textfile is not None:
        write_to_textfile(str(textfile), registry)
    if pushgateway:
        push_to_gateway(pushgateway, job=job, registry=registry, grouping_key=grouping)
