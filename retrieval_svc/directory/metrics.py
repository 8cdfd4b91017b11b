"""Directory sync metrics for Prometheus: a node-exporter textfile, or a Pushgateway push.

A sync is a batch job (a CronJob, or ``sync-ldap --every`` in a loop) with no /metrics to
scrape, so after each sync it reports gauges describing the syncs so far, by tenant and sync
name: when the last one ran and the last one succeeded (the alert
``RetrievalSvcDirectoryNotSynced`` fires when that is too long ago), the grants the last one
changed, the entries it skipped, and how many syncs in a row failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

from retrieval_svc.metrics import publish


@dataclass(slots=True)
class SyncOutcome:
    """What one sync did, and the state its metrics carry from sync to sync."""

    tenant: str
    sync: str
    ok: bool = False
    added: int = 0
    removed: int = 0
    skipped: int = 0
    failure: str = ""  # unreachable | limit | invalid, when not ok
    last_success: float | None = None
    consecutive_failures: int = 0

    def next(self, *, ok: bool, failure: str = "") -> SyncOutcome:
        """The outcome of the sync after this one, carrying what lasts."""
        return SyncOutcome(
            self.tenant,
            self.sync,
            ok=ok,
            failure=failure,
            last_success=time.time() if ok else self.last_success,
            consecutive_failures=0 if ok else self.consecutive_failures + 1,
        )


def registry_of(outcome: SyncOutcome) -> CollectorRegistry:
    """The metrics after a sync."""
    registry = CollectorRegistry()
    labels = {"tenant": outcome.tenant, "sync": outcome.sync}
    names = list(labels)

    def gauge(name: str, text: str, extra: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, text, [*names, *extra], registry=registry)

    gauge(
        "rsvc_directory_sync_last_run_timestamp_seconds", "When the last directory sync ended."
    ).labels(**labels).set(time.time())
    if outcome.last_success is not None:
        gauge(
            "rsvc_directory_sync_last_success_timestamp_seconds",
            "When the last directory sync that applied ended.",
        ).labels(**labels).set(outcome.last_success)
    changed = gauge(
        "rsvc_directory_sync_grants_changed", "Grants the last sync added and removed.", ("op",)
    )
    changed.labels(op="added", **labels).set(outcome.added)
    changed.labels(op="removed", **labels).set(outcome.removed)
    gauge(
        "rsvc_directory_sync_entries_skipped",
        "Directory entries the last sync skipped (an id no store can hold, an id two hold).",
    ).labels(**labels).set(outcome.skipped)
    failures = gauge(
        "rsvc_directory_sync_consecutive_failures",
        "Syncs in a row that changed nothing because they failed, by the last reason "
        "(unreachable, limit, invalid).",
        ("reason",),
    )
    failures.labels(reason=outcome.failure or "none", **labels).set(outcome.consecutive_failures)
    return registry


def export(outcome: SyncOutcome, *, textfile: Path | None, pushgateway: str | None) -> None:
    """Write the metrics to a textfile and/or push them to a Pushgateway."""
    publish(
        registry_of(outcome),
        textfile=textfile,
        pushgateway=pushgateway,
        job="retrieval-svc-directory-sync",
        grouping={"tenant": outcome.tenant, "sync": outcome.sync},
    )
