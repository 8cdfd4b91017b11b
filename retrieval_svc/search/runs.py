"""The indexer's last run of each knowledge base, kept for the operator's console.

One small index per tenant, ``<alias>-runs.<tenant slug>`` (beside the tenant's chunks, out of
their alias and template), holds one document per knowledge base: the newest run's counts and
the first ``KEPT_FAILURES`` documents that were not indexed, with why. The indexer writes it
after every run that wrote anything; the console's *Knowledge bases* page reads it.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

from elasticsearch import ApiError, AsyncElasticsearch, TransportError

from retrieval_svc import reasons
from retrieval_svc.tenancy import tenant_slug
from retrieval_svc.words import say

log = logging.getLogger(__name__)

KEPT_FAILURES = 50
WATCHER, LEASE = "watcher", "lease"  # records that are not runs: a watcher's status, its lease
MAPPING: dict[str, Any] = {
    "dynamic": False,  # the counts and failures are kept, not searched
    "properties": {"knowledge_id": {"type": "keyword"}, "finished_at": {"type": "date"}},
}


def runs_index(index_alias: str, tenant: str) -> str:
    """The tenant's index of last runs."""
    return f"{index_alias}-runs.{tenant_slug(tenant)}"


def run_record(
    knowledge_id: str,
    counts: dict[str, int],
    failures: list[dict[str, str]],
    passed_over: dict[str, int] | None = None,
    passed_over_examples: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """What is kept of one run: when it ended, its counts, its first failures, and what its
    listing passed over, by reason, with a few names each."""
    return {
        "knowledge_id": knowledge_id,
        "finished_at": datetime.now(UTC).isoformat(),
        **counts,
        "failures": failures[:KEPT_FAILURES],
        "failures_not_kept": max(0, len(failures) - KEPT_FAILURES),
        "passed_over": [
            {
                "reason": reason,
                "code": reasons.passed_over_code(reason),
                "count": n,
                "examples": (passed_over_examples or {}).get(reason, []),
            }
            for reason, n in sorted((passed_over or {}).items(), key=lambda kv: (-kv[1], kv[0]))
        ],
    }


async def ensure_runs_index(es: AsyncElasticsearch, index: str) -> None:
    """Make the tenant's runs index on first use."""
    if not await es.indices.exists(index=index):
        await es.options(ignore_status=400).indices.create(  # 400: made meanwhile
            index=index,
            settings={"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"}},
            mappings=MAPPING,
        )


async def record_run(
    es: AsyncElasticsearch, index_alias: str, tenant: str, record: dict[str, Any]
) -> None:
    """Keep ``record`` as its knowledge base's last run (the index made on first use)."""
    index = runs_index(index_alias, tenant)
    await ensure_runs_index(es, index)
    run_id = record.get("run_id") or record["knowledge_id"]  # (a shard's run: its own record)
    await es.index(index=index, id=run_id, document=record, refresh="wait_for")


async def forget_run(
    es: AsyncElasticsearch, index_alias: str, tenant: str, knowledge_id: str
) -> None:
    """Drop a deleted knowledge base's last run."""
    await es.options(ignore_status=404).delete(
        index=runs_index(index_alias, tenant), id=knowledge_id, refresh=True
    )


async def last_runs(
    es: AsyncElasticsearch, index_alias: str, tenant: str, knowledge_ids: list[str]
) -> dict[str, dict[str, Any]]:
    """The last run of each of ``knowledge_ids`` that has one (none when the cluster fails:
    the page that shows them still renders)."""
    if not knowledge_ids:
        return {}
    try:
        found = await es.options(ignore_status=404).mget(
            index=runs_index(index_alias, tenant), ids=knowledge_ids
        )
    except (ApiError, TransportError) as exc:
        log.warning(say("log_runs_not_read", why=type(exc).__name__))
        return {}
    docs = found.body.get("docs", []) if isinstance(found.body, dict) else []
    return {d["_id"]: d["_source"] for d in docs if d.get("found")}


# The counts a run record holds, summed when a run's shards are shown as one.
COUNTS = (
    "documents_seen",
    "documents_indexed",
    "documents_skipped",
    "documents_failed",
    "documents_pruned",
    "documents_retagged",
    "documents_withdrawn",
    "chunks_indexed",
    "chunks_failed",
)
MOST_SHARD_RECORDS = (
    10_000  # (a search's page: a knowledge base indexed in more shards shows these)
)


async def runs_shown(
    es: AsyncElasticsearch, index_alias: str, tenant: str, knowledge_ids: list[str]
) -> dict[str, dict[str, Any]]:
    """The last run of each of ``knowledge_ids`` as an operator reads it: a run split into
    shards (``retrieval-indexer index --shard I/N``, one record each) shown as one, its counts
    summed, with which shards reported and when (none when the cluster fails)."""
    if not knowledge_ids:
        return {}
    try:
        found = await es.options(ignore_status=404).search(
            index=runs_index(index_alias, tenant),
            query={"terms": {"knowledge_id": knowledge_ids}},
            size=MOST_SHARD_RECORDS,
        )
    except (ApiError, TransportError) as exc:
        log.warning(say("log_runs_not_read", why=type(exc).__name__))
        return {}
    body = found.body if isinstance(found.body, dict) else {}
    records: dict[str, list[dict[str, Any]]] = {}
    watchers: dict[str, list[dict[str, Any]]] = {}
    leases: dict[str, list[dict[str, Any]]] = {}
    for hit in (body.get("hits") or {}).get("hits", []):
        source = hit.get("_source") or {}
        kb = str(source.get("knowledge_id"))
        if source.get("kind") == WATCHER:  # (a watcher's status: shown beside the last run)
            watchers.setdefault(kb, []).append(source)
        elif source.get("kind") == LEASE:  # (who writes each source now)
            leases.setdefault(kb, []).extend(lease_holders(source))
        else:
            records.setdefault(kb, []).append(source)
    out = {kb: shown(kb_records) for kb, kb_records in records.items()}
    for kb, status in watchers.items():
        out.setdefault(kb, {"knowledge_id": kb})["watchers"] = sorted(
            status, key=lambda w: (str(w.get("source") or ""), str(w.get("shard") or ""))
        )
    for kb, held in leases.items():
        if held:
            out.setdefault(kb, {"knowledge_id": kb})["leases"] = held
    return out


MAX_LEASE_S = 3600.0  # the longest a lease may last unrenewed (``--lease-ttl``'s ceiling)
_SHARD_SLOT = re.compile(r"[0-9]{1,6}/[0-9]{1,6}")
CLOCK_SKEW_S = 300.0  # how far another host's clock may run ahead of this one's


def live_until(value: object, now: float) -> float | None:
    """When a lease's slot (``expires_at``) or a run's want (``until``) lapses, while it is
    ahead of ``now`` and believable; else None. A time further ahead than a lease lasts
    (a record written by hand or by a host whose clock runs far ahead) or not a number lapses
    at once: nothing in the record holds a source for ever (hosts' clocks may differ by
    ``CLOCK_SKEW_S``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if now < value <= now + MAX_LEASE_S + CLOCK_SKEW_S else None


def slot_name(slot: object) -> bool:
    """Whether ``slot`` names a lease's slot: ``*`` (the whole source) or a shard ``I/N``."""
    if slot == "*":
        return True
    if not isinstance(slot, str) or not _SHARD_SLOT.fullmatch(slot):
        return False
    i, n = map(int, slot.split("/"))
    return i < n


def lease_holders(record: dict[str, Any], now: float | None = None) -> list[dict[str, Any]]:
    """Who holds a source's lease (``indexer.lease``), a row per unexpired slot: the source,
    the slot (``*`` or a shard ``I/N``), the holder's name, role, host and process, since and
    until when (ISO times)."""
    now = time.time() if now is None else now
    rows = []
    slots = record.get("slots")
    for slot, entry in sorted(slots.items() if isinstance(slots, dict) else ()):
        if (
            not isinstance(entry, dict)
            or not slot_name(slot)
            or live_until(entry.get("expires_at"), now) is None
        ):
            continue
        rows.append(
            {
                "source": record.get("source"),
                "slot": slot,
                **{k: entry.get(k) for k in ("name", "role", "host", "pid")},
                "since": _iso(entry.get("since")),
                "expires_at": _iso(entry.get("expires_at")),
            }
        )
    return rows


def _iso(at: object) -> str | None:
    if isinstance(at, bool) or not isinstance(at, int | float) or not at:
        return None
    try:
        return datetime.fromtimestamp(float(at), UTC).isoformat()
    except (OverflowError, OSError, ValueError):  # (a time no calendar holds)
        return None


def _shard_of(record: dict[str, Any]) -> tuple[int, int] | None:
    try:
        index, count = str(record["shard"]).split("/")
        return int(index), int(count)
    except (KeyError, ValueError):
        return None


def shown(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One knowledge base's run records as one run: the newest run's records — the unsharded
    record, or the shard records of the newest shard count — combined."""
    by_layout: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        shard = _shard_of(record)
        by_layout.setdefault(shard[1] if shard else 0, []).append(record)
    newest = max(by_layout.values(), key=lambda rs: max(str(r.get("finished_at", "")) for r in rs))
    if _shard_of(newest[0]) is None:
        return newest[0]
    newest.sort(key=lambda r: (_shard_of(r) or (0, 0))[0])
    count = (_shard_of(newest[0]) or (0, 0))[1]
    finished = sorted(str(r.get("finished_at", "")) for r in newest)
    failures = [f for r in newest for f in r.get("failures", [])]
    passed: dict[str, dict[str, Any]] = {}
    for record in newest:
        for item in record.get("passed_over", []):
            row = passed.setdefault(
                item["reason"],
                {  # (records kept before reasons had codes: the code from the text)
                    "reason": item["reason"],
                    "code": item.get("code") or reasons.passed_over_code(item["reason"]),
                    "count": 0,
                },
            )
            row["count"] += int(item.get("count", 0))
            row["examples"] = (row.get("examples", []) + list(item.get("examples", [])))[:5]
    reported = {(_shard_of(r) or (0, 0))[0] for r in newest}
    return {
        "knowledge_id": newest[0].get("knowledge_id"),
        "finished_at": finished[-1],
        "source": newest[0].get("source"),
        **{name: sum(int(r.get(name, 0) or 0) for r in newest) for name in COUNTS},
        "failures": failures[:KEPT_FAILURES],
        "failures_not_kept": max(0, len(failures) - KEPT_FAILURES)
        + sum(int(r.get("failures_not_kept", 0) or 0) for r in newest),
        "passed_over": sorted(passed.values(), key=lambda row: (-row["count"], row["reason"])),
        "fail_closed": [item for r in newest for item in r.get("fail_closed", [])][:100],
        "shards": {
            "count": count,
            "reported": len(reported),
            "missing": [i for i in range(count) if i not in reported][:100],
            "first_finished_at": finished[0],
            "runs": [
                {
                    "shard": r.get("shard"),
                    "finished_at": r.get("finished_at"),
                    **{name: r.get(name, 0) for name in ("documents_seen", "documents_failed")},
                }
                for r in newest[:100]
            ],
        },
    }
