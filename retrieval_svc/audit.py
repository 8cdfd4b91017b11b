"""The audit trail (design.md §14): one event per retrieval — who, through which key and
route, asked which knowledge bases, and which documents and chunks came back, in order.

Below the pipeline, never in its way: ``Audit.record`` is synchronous and cannot fail a
request. The ``log`` sink writes a JSON line to the ``rsvc.audit`` logger (route it apart
from the access log); the ``elasticsearch`` sink puts the event on a bounded in-memory queue
that a background task writes in bulk to per-tenant, per-day indices
(``<alias>-audit.<tenant slug>-YYYY.MM.DD``), and drops — counting — what does not fit. This
Elasticsearch distribution has no ILM: the same task deletes indices older than
``RSVC_AUDIT_RETENTION_DAYS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk

from retrieval_svc.chunks import UnifiedChunk
from retrieval_svc.metrics import Metrics
from retrieval_svc.settings import Settings
from retrieval_svc.tenancy import tenant_slug
from retrieval_svc.words import say

log = logging.getLogger(__name__)
audit_log = logging.getLogger("rsvc.audit")

BATCH = 500  # events per bulk request
FLUSH_EVERY_S = 1.0  # the most an event waits in the queue while the cluster answers
RETENTION_EVERY_S = 3600.0
MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "@timestamp": {"type": "date"},
        "request_id": {"type": "keyword"},
        "route": {"type": "keyword"},
        "key": {"type": "keyword"},
        "actor": {"type": "keyword"},
        "tenant": {"type": "keyword"},
        "user": {"type": "keyword"},
        "identity": {"type": "keyword"},
        "roles": {"type": "integer"},
        "knowledge_ids": {"type": "keyword"},
        "mode": {"type": "keyword"},
        "documents": {"type": "keyword"},
        "chunks": {"type": "keyword"},
        "web": {"type": "integer"},
        "query": {"type": "text", "index": False},
    },
}


def audit_prefix(index_alias: str) -> str:
    """The prefix of every audit index under ``index_alias`` (apart from the chunk indices,
    whose template is for ``<alias>.*``)."""
    return f"{index_alias}-audit."


def audit_index(index_alias: str, tenant: str, day: date) -> str:
    """The audit index of ``tenant`` for ``day`` (UTC)."""
    return f"{audit_prefix(index_alias)}{tenant_slug(tenant)}-{day:%Y.%m.%d}"


def index_day(name: str) -> date | None:
    """The day an audit index holds, from its name (None: not an audit index's name)."""
    try:
        return datetime.strptime(name.rsplit("-", 1)[-1], "%Y.%m.%d").replace(tzinfo=UTC).date()
    except ValueError:
        return None


def user_token(user_id: str | None, mode: str, key: bytes) -> str | None:
    """The user as an event records it: the id, or its keyed hash (HMAC-SHA-256, hex)."""
    if user_id is None or mode == "plain":
        return user_id
    return hmac.new(key, user_id.encode(), hashlib.sha256).hexdigest()


class Audit:
    """Records retrievals to the configured sink; ``start``/``stop`` run its background work."""

    def __init__(self, settings: Settings, es: AsyncElasticsearch, metrics: Metrics) -> None:
        self.sink = settings.audit
        self.settings = settings
        self.es = es
        self.metrics = metrics
        secret = settings.audit_hash_key
        self.hash_key = secret.get_secret_value().encode() if secret else b""
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(settings.audit_queue_size)
        self.task: asyncio.Task[None] | None = None

    def user(self, user_id: str | None) -> str | None:
        """``user_id`` as events record it (what ``audit search --user`` looks for)."""
        return user_token(user_id, self.settings.audit_user, self.hash_key)

    def record(
        self,
        *,
        key: str,
        actor: str,
        tenant: str,
        user_id: str | None,
        roles: int,
        knowledge_ids: Sequence[str],
        mode: str,
        chunks: Sequence[UnifiedChunk],
        request_id: str | None,
        route: str | None,
        query: str,
        identity: str = "none",
    ) -> None:
        """One retrieval's event; never raises, never waits. ``actor`` is who acted (``key:<name>``,
        ``console:<admin key>``), ``user_id`` the subject: the user whose permissions applied."""
        if self.sink == "off":
            return
        try:
            rag = [c for c in chunks if c.source_type == "rag"]
            event: dict[str, Any] = {
                "@timestamp": datetime.now(UTC).isoformat(),
                "request_id": request_id,
                "route": route,
                "key": key,
                "actor": actor,
                "tenant": tenant,
                "user": self.user(user_id),
                # What the user id resolved to (design.md §17): known, alias, none, or
                # unknown / ambiguous — a person who should see more, or a misconfiguration.
                "identity": identity,
                "roles": roles,
                "knowledge_ids": list(knowledge_ids),
                "mode": mode,
                "documents": list(dict.fromkeys(c.document_id for c in rag if c.document_id)),
                "chunks": [c.chunk_id for c in rag if c.chunk_id],
                "web": len(chunks) - len(rag),
            }
            if self.settings.audit_queries:
                event["query"] = query
            if self.sink == "log":
                audit_log.info("retrieval", extra={"fields": {"event": "retrieval", **event}})
                self.metrics.audit_events.labels(outcome="written").inc()
                return
            self.queue.put_nowait(event)
            self.metrics.audit_events.labels(outcome="queued").inc()
        except asyncio.QueueFull:
            self.metrics.audit_events.labels(outcome="dropped").inc()
        except Exception:  # an audit record must never fail the retrieval it records
            log.exception("audit event not recorded")
            self.metrics.audit_events.labels(outcome="dropped").inc()

    async def start(self) -> None:
        """Start writing (the ``elasticsearch`` sink): template first, then the loop."""
        if self.sink == "elasticsearch":
            self.task = asyncio.create_task(self._run(), name="audit-writer")

    async def stop(self) -> None:
        """Write what is queued (within a few seconds), then stop."""
        if self.task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                while not self.queue.empty():
                    await asyncio.sleep(0.05)
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def _run(self) -> None:
        templated = False
        cleaned = float("-inf")
        while True:
            batch = [await self.queue.get()]
            deadline = time.monotonic() + FLUSH_EVERY_S
            while len(batch) < BATCH and time.monotonic() < deadline:
                try:
                    batch.append(
                        await asyncio.wait_for(self.queue.get(), deadline - time.monotonic())
                    )
                except TimeoutError:
                    break
            try:
                if not templated:
                    await self.put_template()
                    templated = True
                await self.write(batch)
                if time.monotonic() - cleaned > RETENTION_EVERY_S:
                    await self.apply_retention()
                    cleaned = time.monotonic()
            except Exception as exc:  # the cluster is away: these events are lost, counted
                self.metrics.audit_events.labels(outcome="failed").inc(len(batch))
                log.warning(say("log_audit_not_written", n=len(batch), why=type(exc).__name__))

    async def search(
        self,
        *,
        tenant: str | None,
        document: str | None = None,
        user: str | None = None,
        actor: str | None = None,
        since: datetime,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Events, newest first, since ``since``: that returned ``document``, of the subject
        ``user`` (its id, hashed here as events record it), by ``actor``; all recent ones when
        none is named; of one tenant, or of all."""
        clauses: list[dict[str, Any]] = [{"range": {"@timestamp": {"gte": since.isoformat()}}}]
        if document:
            clauses.append({"term": {"documents": document}})
        if user:
            clauses.append({"term": {"user": self.user(user)}})
        if actor:
            clauses.append({"term": {"actor": actor}})
        prefix = audit_prefix(self.settings.index_alias)
        found = await self.es.search(
            index=prefix + (f"{tenant_slug(tenant)}-*" if tenant else "*"),
            query={"bool": {"filter": clauses}},
            size=limit,
            from_=offset,
            sort=[{"@timestamp": "desc"}],
            ignore_unavailable=True,
            allow_no_indices=True,
        )
        return [hit["_source"] for hit in found["hits"]["hits"]]

    async def unresolved(
        self, tenant: str, since: datetime, size: int = 200
    ) -> list[tuple[str, str, str, int, float]]:
        """The ids that resolved to no one (or to several people) in ``tenant``'s trail since
        ``since``: (id as events record it, status, key, requests, last seen), the most
        recently seen first — what the console lists, kept across restarts and replicas.
        Nothing without the ``elasticsearch`` sink."""
        if self.sink != "elasticsearch":
            return []
        query = {"bool": {"filter": [
            {"range": {"@timestamp": {"gte": since.isoformat()}}},
            {"terms": {"identity": ["unknown", "ambiguous"]}},
            {"exists": {"field": "user"}},
        ]}}  # fmt: skip
        sources = [{"user": {"terms": {"field": "user"}}}, {"key": {"terms": {"field": "key"}}}]
        out: list[tuple[str, str, str, int, float]] = []
        after: dict[str, Any] | None = None
        for _ in range(10):  # (a composite aggregation: the cluster's basic features only)
            composite: dict[str, Any] = {"size": 1000, "sources": sources}
            if after:
                composite["after"] = after
            found = await self.es.search(
                index=audit_prefix(self.settings.index_alias) + f"{tenant_slug(tenant)}-*",
                size=0,
                query=query,
                aggs={"ids": {"composite": composite, "aggs": {
                    "last": {"max": {"field": "@timestamp"}},
                    "status": {"terms": {"field": "identity", "size": 1}},
                }}},
                ignore_unavailable=True,
                allow_no_indices=True,
            )  # fmt: skip
            agg = (found.body.get("aggregations") or {}).get("ids") or {}
            for bucket in agg.get("buckets", []):
                status = (bucket["status"]["buckets"] or [{"key": "unknown"}])[0]["key"]
                last = (bucket["last"]["value"] or 0.0) / 1000
                user, key = bucket["key"]["user"], bucket["key"]["key"]
                out.append((str(user), str(status), str(key), int(bucket["doc_count"]), last))
            after = agg.get("after_key")
            if not after or not agg.get("buckets"):
                break
        return sorted(out, key=lambda row: row[4], reverse=True)[:size]

    async def put_template(self) -> None:
        """The template of the audit indices (strict mapping, one shard)."""
        prefix = audit_prefix(self.settings.index_alias)
        await self.es.indices.put_index_template(
            name=f"{self.settings.index_alias}-audit-template",
            index_patterns=[f"{prefix}*"],
            priority=100 + len(prefix),
            template={
                "settings": {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"}},
                "mappings": MAPPING,
            },
            meta={"managed_by": "retrieval-svc", "what": "audit trail"},
        )
        # Indices made before a field was added (today's, across an upgrade) take it too: their
        # mapping is strict, and an event with an unknown field would be refused.
        await self.es.indices.put_mapping(
            index=f"{prefix}*",
            properties=MAPPING["properties"],
            ignore_unavailable=True,
            allow_no_indices=True,
        )

    async def write(self, events: list[dict[str, Any]]) -> None:
        """One bulk request for ``events``, each to its tenant's index of its day."""
        alias = self.settings.index_alias
        actions = [
            {
                "_index": audit_index(
                    alias, e["tenant"], datetime.fromisoformat(e["@timestamp"]).date()
                ),
                "_source": e,
            }
            for e in events
        ]
        written, errors = await async_bulk(self.es, actions, raise_on_error=False, stats_only=True)
        failed = errors if isinstance(errors, int) else len(errors)
        self.metrics.audit_events.labels(outcome="written").inc(written)
        if failed:
            self.metrics.audit_events.labels(outcome="failed").inc(failed)

    async def apply_retention(self, today: date | None = None) -> list[str]:
        """Delete audit indices older than ``RSVC_AUDIT_RETENTION_DAYS``; their names."""
        today = today or datetime.now(UTC).date()
        oldest = today - timedelta(days=self.settings.audit_retention_days)
        pattern = f"{audit_prefix(self.settings.index_alias)}*"
        found = await self.es.options(ignore_status=404).indices.get(index=pattern)
        expired = sorted(
            name for name in found if (day := index_day(name)) is not None and day < oldest
        )
        if expired:
            await self.es.indices.delete(index=",".join(expired))
            log.info("audit: retention deleted %s", ", ".join(expired))
        return expired
