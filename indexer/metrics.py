"""Indexer run metrics for Prometheus: a node-exporter textfile, or a Pushgateway push.

A batch job has no /metrics to scrape, so each run reports gauges describing itself
(documents and chunks by outcome, bytes read, duration, when it last ran and succeeded),
grouped by knowledge base — and by shard when the run is one shard of a source (``--shard``,
an indexed Job's pods): each shard pushes its own group, and ``sum by (knowledge_id, outcome)``
shows the run as one. An unsharded run's ``shard`` label is empty, which Prometheus reads as
absent.
"""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

from indexer.report import Report
from indexer.shards import Shard
from retrieval_svc.metrics import publish


def run_registry(report: Report, shard: str = "") -> CollectorRegistry:
    """The metrics of one run (``shard``: ``I-of-N`` when it is one shard of a source)."""
    registry = CollectorRegistry()
    kb = {"knowledge_id": report.knowledge_id, "shard": shard}
    documents = Gauge(
        "rsvc_indexer_documents",
        "Documents in the last run, by outcome.",
        ["knowledge_id", "shard", "outcome"],
        registry=registry,
    )
    for outcome, n in (
        ("indexed", report.documents_indexed),
        ("skipped", report.documents_skipped),
        ("failed", report.documents_failed),
        ("pruned", report.documents_pruned),
        ("retagged", report.documents_retagged),
        ("withdrawn", report.documents_withdrawn),
    ):
        documents.labels(outcome=outcome, **kb).set(n)
    chunks = Gauge(
        "rsvc_indexer_chunks",
        "Chunks in the last run, by outcome.",
        ["knowledge_id", "shard", "outcome"],
        registry=registry,
    )
    for outcome, n in (
        ("indexed", report.chunks_indexed),
        ("failed", report.chunks_failed),
        ("stale_deleted", report.stale_chunks_deleted),
    ):
        chunks.labels(outcome=outcome, **kb).set(n)
    Gauge(
        "rsvc_indexer_bytes_read",
        "Bytes read from the source in the last run.",
        ["knowledge_id", "shard"],
        registry=registry,
    ).labels(**kb).set(report.bytes_read)
    Gauge(
        "rsvc_indexer_duration_seconds",
        "Duration of the last run.",
        ["knowledge_id", "shard"],
        registry=registry,
    ).labels(**kb).set(report.duration_s)
    now = time.time()
    Gauge(
        "rsvc_indexer_last_run_timestamp_seconds",
        "When the last run ended.",
        ["knowledge_id", "shard"],
        registry=registry,
    ).labels(**kb).set(now)
    if report.ok:
        Gauge(
            "rsvc_indexer_last_success_timestamp_seconds",
            "When the last run without failures ended.",
            ["knowledge_id", "shard"],
            registry=registry,
        ).labels(**kb).set(now)
    return registry


def export(
    report: Report, *, textfile: Path | None, pushgateway: str | None, shard: Shard | None = None
) -> None:
    """Write the run's metrics to a textfile and/or push them to a Pushgateway (a shard's
    under its own grouping key, so shards do not overwrite each other)."""
    name = f"{shard.index}-of-{shard.count}" if shard is not None else ""
    grouping = {"knowledge_id": report.knowledge_id}
    if name:
        grouping["shard"] = name
    publish(
        run_registry(report, name),
        textfile=textfile,
        pushgateway=pushgateway,
        job="retrieval-indexer",
        grouping=grouping,
    )
