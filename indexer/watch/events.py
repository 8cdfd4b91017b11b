"""Where the watcher hears of changes: a folder's file-system events (``watchfiles``), a
bucket's event notifications through an SQS queue, and its own files (rules, manifest).

Every event is only "look at this key now", never the truth: events can be lost, arrive twice
or out of order, and a mounted share (SMB, NFS, CIFS) may deliver none at all — the periodic
re-listing finds whatever they missed. A sidecar's event names its document.

``watchfiles`` (Rust's ``notify``: inotify on Linux, debounced in Rust) over ``watchdog``: an
async iterator with its own debounce and stop event, already installed with the service's
``uvicorn[standard]``, and one thread for a whole tree.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlparse

from indexer.passing_over import SIDECAR_SUFFIX

MAX_BATCH = 500  # messages taken at once from a queue's backlog


@dataclass(slots=True)
class Heard:
    """Keys to look at (objects or folders), heard at ``at`` (``time.time()`` of the earliest
    change), and what to call once they are settled (an SQS batch's delete)."""

    keys: set[str] = field(default_factory=set)
    at: float = 0.0
    ack: list[Callable[[], None]] = field(default_factory=list)

    def add(self, other: Heard) -> None:
        self.keys |= other.keys
        self.at = min(self.at, other.at) if self.keys and self.at else other.at
        self.ack += other.ack


def document_key(key: str) -> str:
    """The document a key's change concerns (a sidecar's is its document's)."""
    return key.removesuffix(SIDECAR_SUFFIX)


async def folder_events(
    root: Path, stop: asyncio.Event, debounce_ms: int = 300
) -> AsyncIterator[Heard]:
    """The keys below ``root`` that changed, a debounced batch at a time."""
    from watchfiles import awatch

    async for changes in awatch(
        root, debounce=debounce_ms, step=50, stop_event=stop, recursive=True
    ):
        heard = Heard(at=time.time())
        for _, raw in changes:
            try:
                key = Path(raw).relative_to(root).as_posix()
            except ValueError:
                continue
            if key and key != ".":
                heard.keys.add(document_key(key))
        if heard.keys:
            yield heard


class FileStamps:
    """The watcher's own files (``--acl-rules``, ``--manifest``), looked at every second by
    their size and modification time, through links (a Kubernetes ConfigMap is replaced by
    swapping a link, which no file event names)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._last = self._now()

    def _now(self) -> tuple[tuple[int, int] | None, ...]:
        stamps: list[tuple[int, int] | None] = []
        for path in self.paths:
            try:
                st = path.stat()
                stamps.append((st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def changed(self) -> bool:
        """Whether any of them changed since the last call."""
        now = self._now()
        changed, self._last = now != self._last, now
        return changed


def _records(body: Any) -> list[dict[str, Any]]:
    """The S3 event records of one message: S3's own, wrapped by SNS, or EventBridge's."""
    if isinstance(body, dict) and isinstance(body.get("Message"), str):  # (through SNS)
        try:
            body = json.loads(body["Message"])
        except json.JSONDecodeError:
            return []
    if not isinstance(body, dict):
        return []
    if isinstance(body.get("Records"), list):
        return [r for r in body["Records"] if isinstance(r, dict)]
    detail = body.get("detail")
    if isinstance(detail, dict) and isinstance(detail.get("object"), dict):  # EventBridge
        return [
            {
                "eventName": str(body.get("detail-type", "")),
                "eventTime": body.get("time"),
                "s3": {
                    "bucket": {"name": (detail.get("bucket") or {}).get("name", "")},
                    # (EventBridge keys are not URL-encoded: encoded here as S3's are)
                    "object": {"key": _plus_encoded(str(detail["object"].get("key", "")))},
                },
            }
        ]
    return []


def _plus_encoded(key: str) -> str:
    from urllib.parse import quote_plus

    return quote_plus(key, safe="/")


def keys_of(body: Any, bucket: str, prefix: str) -> tuple[set[str], float | None]:
    """The keys under ``prefix`` of ``bucket`` an event message names, and its earliest event
    time (S3 sends keys URL-encoded, spaces as ``+``)."""
    keys: set[str] = set()
    earliest: float | None = None
    for record in _records(body):
        s3 = record.get("s3") or {}
        if (s3.get("bucket") or {}).get("name") != bucket:
            continue
        key = unquote_plus(str((s3.get("object") or {}).get("key", "")))
        if not key.startswith(prefix) or key == prefix:
            continue
        keys.add(document_key(key[len(prefix) :]))
        with_time = str(record.get("eventTime") or "")
        try:
            when = datetime.fromisoformat(with_time.replace("Z", "+00:00")).timestamp()
            earliest = when if earliest is None else min(earliest, when)
        except ValueError:
            pass
    return keys, earliest


def queue_url(client: Any, spec: str) -> str:
    """The queue ``--events`` names: ``sqs://NAME`` (its URL asked of the endpoint) or the
    queue's own ``http(s)://`` URL."""
    parsed = urlparse(spec)
    if parsed.scheme in ("http", "https"):
        return spec
    if parsed.scheme != "sqs" or not (parsed.netloc or parsed.path.strip("/")):
        raise ValueError(f"--events {spec!r}: give sqs://QUEUE-NAME or the queue's URL")
    name = parsed.netloc or parsed.path.strip("/")
    return str(client.get_queue_url(QueueName=name)["QueueUrl"])


async def queue_events(
    client: Any, url: str, bucket: str, prefix: str, stop: asyncio.Event, wait_s: int = 2
) -> AsyncIterator[Heard]:
    """The keys a bucket's notifications name, a received batch at a time; each batch's
    messages are deleted (``ack``) only once its keys are settled: a watcher that dies first
    gets them again (at-least-once)."""
    while not stop.is_set():
        messages: list[dict[str, Any]] = []
        wait = wait_s
        while len(messages) < MAX_BATCH:  # (a backlog drained in batches, not ten at a time)
            answer = await asyncio.to_thread(
                client.receive_message, QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait
            )
            got = answer.get("Messages", [])
            messages += got
            if len(got) < 10:
                break
            wait = 0
        if not messages:
            continue
        heard = Heard(at=time.time())
        for message in messages:
            try:
                body = json.loads(message.get("Body") or "")
            except json.JSONDecodeError:
                body = None
            keys, when = keys_of(body, bucket, prefix)
            heard.keys |= keys
            if when is not None:
                heard.at = min(heard.at, when)
        handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in
                   enumerate(messages)]  # fmt: skip

        def delete(entries: list[dict[str, str]] = handles) -> None:
            for i in range(0, len(entries), 10):  # (SQS deletes ten at a time)
                client.delete_message_batch(QueueUrl=url, Entries=entries[i : i + 10])

        heard.ack.append(delete)
        yield heard
