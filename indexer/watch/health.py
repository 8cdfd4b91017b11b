"""What a running watcher tells its operator: Prometheus metrics and Kubernetes probes on one
small HTTP server (``--health-port``), and a status record in the tenant's runs index that
``show`` and the console read (its lag, its last event, its last re-listing).

| metric | what |
|---|---|
| ``rsvc_watch_events_total{kind}`` | keys heard of: ``folder``, ``queue``, ``files`` |
| ``rsvc_watch_lag_seconds{stage}`` | a change → in force: ``narrowed``, then ``indexed`` |
| ``rsvc_watch_relisting_seconds`` | the last re-listing's listing and comparison |
| ``rsvc_watch_last_relisting_timestamp_seconds`` | when the last re-listing completed |
| ``rsvc_watch_last_event_timestamp_seconds`` | when the last change was heard |
| ``rsvc_watch_queue_depth`` | keys heard and not yet settled |
| ``rsvc_watch_errors_total`` | settles that failed (the keys are kept and tried again) |
| ``rsvc_watch_rejected_total{reason}`` | event messages (or records) that could not be read |
| ``rsvc_watch_problem{what}`` | 1 while ``elasticsearch`` or the ``source`` folder is wrong |

``/healthz`` answers 200 while the watcher's loop turns (503 when it has not for
``stale_s``); ``/readyz`` 200 once its first full re-listing is done and it holds its lease.
Both name each problem there is now, a line each (Elasticsearch not answering, the folder
replaced or gone), as ``rsvc_watch_problem{what}`` and the status record (``problems``) do.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from indexer.loading import IndexOptions
from indexer.sources import Source
from indexer.watch.settle import Settled
from retrieval_svc.search.runs import WATCHER
from retrieval_svc.words import say

if TYPE_CHECKING:
    from indexer.watch.events import Rejected

log = logging.getLogger(__name__)

LAG_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 900)


class WatchMetrics:
    """The watcher's metrics, on a registry of its own."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.registry = CollectorRegistry()
        names = sorted(labels)
        self.labels = labels
        self.events = Counter(
            "rsvc_watch_events_total", "Keys heard of, by where from.", [*names, "kind"],
            registry=self.registry,
        )  # fmt: skip
        self.lag = Histogram(
            "rsvc_watch_lag_seconds",
            "A change at the source to its being in force, by stage.",
            [*names, "stage"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.relisting = Gauge(
            "rsvc_watch_relisting_seconds", "The last re-listing's listing and comparison.",
            names, registry=self.registry,
        )  # fmt: skip
        self.last_relisting = Gauge(
            "rsvc_watch_last_relisting_timestamp_seconds",
            "When the last re-listing completed.", names, registry=self.registry,
        )  # fmt: skip
        self.last_event = Gauge(
            "rsvc_watch_last_event_timestamp_seconds", "When the last change was heard.",
            names, registry=self.registry,
        )  # fmt: skip
        self.queue = Gauge(
            "rsvc_watch_queue_depth", "Keys heard and not yet settled.", names,
            registry=self.registry,
        )  # fmt: skip
        self.problem = Gauge(
            "rsvc_watch_problem", "1 while something is wrong: Elasticsearch not answering, "
            "the watched folder replaced or gone.", [*names, "what"], registry=self.registry,
        )  # fmt: skip
        self.errors = Counter(
            "rsvc_watch_errors_total", "Settles that failed (their keys are tried again).",
            names, registry=self.registry,
        )  # fmt: skip
        self.rejected = Counter(
            "rsvc_watch_rejected_total",
            "Event messages or records that could not be read (named, then dropped).",
            [*names, "reason"], registry=self.registry,
        )  # fmt: skip


class Health:
    """The loop's heartbeat and readiness, served with the metrics."""

    def __init__(self, metrics: WatchMetrics, stale_s: float = 120.0) -> None:
        self.metrics, self.stale_s = metrics, stale_s
        self.beat_at = time.monotonic()
        self.ready = False
        self.problems: dict[str, str] = {}  # what is wrong now, by what: said by /readyz
        self._server: ThreadingHTTPServer | None = None

    def now_wrong(self) -> list[tuple[str, str]]:
        """The problems there are now (and the gauge set to them)."""
        problems = sorted(self.problems.items())
        for what in ("elasticsearch", "source"):
            wrong = 1 if what in self.problems else 0
            self.metrics.problem.labels(what=what, **self.metrics.labels).set(wrong)
        return problems

    def beat(self) -> None:
        self.beat_at = time.monotonic()

    def alive(self) -> bool:
        return time.monotonic() - self.beat_at < self.stale_s

    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve /metrics, /healthz and /readyz on ``port`` (0: a free one); the port."""
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    health.now_wrong()
                    body, status = generate_latest(health.metrics.registry), 200
                elif self.path == "/healthz":
                    status = 200 if health.alive() else 503
                    said = "".join(f"{what}: {why}\n" for what, why in health.now_wrong())
                    first = "ok\n" if status == 200 else "the watch loop has stalled\n"
                    body = (first + said).encode()
                elif self.path == "/readyz":
                    status = 200 if health.ready and health.alive() else 503
                    said = "".join(f"{what}: {why}\n" for what, why in health.now_wrong())
                    body = (("ready\n" if status == 200 else "not ready\n") + said).encode()
                else:
                    body, status = b"not found\n", 404
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:  # (probes every few seconds: quiet)
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass(slots=True)
class Status:
    """What the status record says."""

    started_at: float = field(default_factory=time.time)
    events: int = 0
    errors: int = 0
    last_event_at: float | None = None
    last_relisting_at: float | None = None
    relisting_s: float | None = None
    lag_narrowed_s: float | None = None
    lag_indexed_s: float | None = None
    last_error: str = ""
    state: str = "starting"
    rejected: int = 0
    last_rejected: str = ""
    root_changed_at: float | None = None  # when the watched folder was last replaced or lost


def _iso(at: float | None) -> str | None:
    return datetime.fromtimestamp(at, UTC).isoformat() if at else None


def status_record(
    status: Status, options: IndexOptions, source: Source, rescan_s: float, queue: int
) -> dict[str, Any]:
    """The watcher's status record (``show`` and the console read it)."""
    return {
        "kind": WATCHER,
        "knowledge_id": options.knowledge_id,
        "finished_at": datetime.now(UTC).isoformat(),  # (its heartbeat)
        "source": source.description,
        "shard": str(options.shard) if options.shard else None,
        "state": status.state,
        "started_at": _iso(status.started_at),
        "last_event_at": _iso(status.last_event_at),
        "last_relisting_at": _iso(status.last_relisting_at),
        "relisting_s": status.relisting_s,
        "lag_narrowed_s": status.lag_narrowed_s,
        "lag_indexed_s": status.lag_indexed_s,
        "queue": queue,
        "events": status.events,
        "errors": status.errors,
        "last_error": status.last_error,
        "rejected": status.rejected,
        "last_rejected": status.last_rejected,
        "rescan_s": rescan_s,
        "root_changed_at": _iso(status.root_changed_at),
    }


def account(
    status: Status,
    metrics: WatchMetrics,
    heard_at: float,
    done: Settled,
    relist: bool,
    queue: int,
    indexed: bool,
) -> None:
    """A settle's lags (from ``heard_at``, the change; 0: none heard), a re-listing's time,
    the queue's depth: into the status record and the metrics."""
    labels = metrics.labels
    if heard_at:
        status.lag_narrowed_s = max(0.0, done.narrowed_at - heard_at)
        metrics.lag.labels(stage="narrowed", **labels).observe(status.lag_narrowed_s)
        if indexed:
            status.lag_indexed_s = max(0.0, time.time() - heard_at)
            metrics.lag.labels(stage="indexed", **labels).observe(status.lag_indexed_s)
    if relist:
        status.last_relisting_at = time.time()
        status.relisting_s = done.listed_s
        metrics.relisting.labels(**labels).set(done.listed_s)
        metrics.last_relisting.labels(**labels).set(status.last_relisting_at)
    metrics.queue.labels(**labels).set(queue)


def rejected(status: Status, metrics: WatchMetrics, unread: list[Rejected]) -> None:
    """Event messages (or records) that could not be read: logged one line each, counted by
    reason, the last in the status record (they are dropped: the re-listing covers them)."""
    for one in unread:
        metrics.rejected.labels(reason=one.problem, **metrics.labels).inc()
        if not one.quiet:
            log.warning("%s", say("event_rejected", where=one.where or "-",
                                  reason=say(f"event_{one.problem}")))  # fmt: skip
    status.rejected += len(unread)
    last = unread[-1]
    status.last_rejected = f"{last.problem} ({last.where})" if last.where else last.problem
