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
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from indexer.passing_over import SIDECAR_SUFFIX
from indexer.watch.notices import LIMITS, Limits, read_message

MAX_BATCH = 500  # messages taken at once from a queue's backlog


@dataclass(frozen=True, slots=True)
class Rejected:
    """A message, or a record of one, that could not be read: why (``notices.PROBLEMS``) and
    which (a queue message's id, a sender's address). A ``quiet`` one is counted (the metric,
    the status record) without a log line of its own: one of a flood of refused pushes."""

    problem: str
    where: str
    quiet: bool = False


@dataclass(slots=True)
class Heard:
    """Keys to look at (objects or folders), heard at ``at`` (``time.time()`` of the earliest
    change), and what to call once they are settled (an SQS batch's delete)."""

    keys: set[str] = field(default_factory=set)
    at: float = 0.0
    ack: list[Callable[[], None]] = field(default_factory=list)
    kind: str = ""  # where from: "folder", "queue", "pushed" (the events metric's label)
    rejected: list[Rejected] = field(default_factory=list)  # (named once, never carried on)

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
        heard = Heard(at=time.time(), kind="folder")
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
    their identity (device, inode), size, modification and change times, through links (a
    Kubernetes ConfigMap is replaced by swapping a link, which no file event names). The
    change time is the kernel's: a file copied in with its old modification time and size
    (``cp -p``, ``rsync -a``, ``tar x``) is still a change."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._last = self._now()

    def _now(self) -> tuple[tuple[int, ...] | None, ...]:
        stamps: list[tuple[int, ...] | None] = []
        for path in self.paths:
            try:
                st = path.stat()
                stamps.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def changed(self) -> bool:
        """Whether any of them changed since the last call."""
        now = self._now()
        changed, self._last = now != self._last, now
        return changed


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


def dead_letter_url(client: Any, url: str) -> str | None:
    """The dead-letter queue the queue's redrive policy names, if any: where a message the
    watcher cannot read is sent before it is deleted."""
    try:
        attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
        policy = json.loads(attributes.get("Attributes", {}).get("RedrivePolicy") or "{}")
        arn = str(policy.get("deadLetterTargetArn") or "")
    except Exception:  # (not allowed to ask, or no policy: unreadable messages are deleted)
        return None
    parts = arn.split(":")  # arn:aws:sqs:REGION:ACCOUNT:NAME
    if len(parts) != 6 or not parts[5]:
        return None
    answer = client.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])
    return str(answer["QueueUrl"])


async def queue_events(
    client: Any,
    url: str,
    bucket: str,
    prefix: str,
    stop: asyncio.Event,
    wait_s: int = 2,
    limits: Limits = LIMITS,
) -> AsyncIterator[Heard]:
    """The keys a bucket's notifications name, a received batch at a time; each batch's
    messages are deleted (``ack``) only once its keys are settled: a watcher that dies first
    gets them again (at-least-once). A message that names nothing it can read is named
    (``Heard.rejected``), sent to the queue's dead-letter queue where its redrive policy
    names one, and deleted at once; it never holds back the rest of its batch."""
    dead_letters = await asyncio.to_thread(dead_letter_url, client, url)
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
        heard = Heard(at=time.time(), kind="queue")
        settled: list[dict[str, Any]] = []
        unread: list[dict[str, Any]] = []
        for message in messages:
            read = read_message(str(message.get("Body") or ""), bucket, prefix, limits)
            heard.keys |= read.keys
            if read.earliest is not None:
                heard.at = min(heard.at, read.earliest)
            where = str(message.get("MessageId") or "")
            heard.rejected += [Rejected(problem, where) for problem in read.problems]
            (unread if read.problems and not read.keys else settled).append(message)
        if unread:
            await asyncio.to_thread(_drop, client, url, unread, dead_letters)
        handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in
                   enumerate(settled)]  # fmt: skip

        def delete(entries: list[dict[str, str]] = handles) -> None:
            for i in range(0, len(entries), 10):  # (SQS deletes ten at a time)
                client.delete_message_batch(QueueUrl=url, Entries=entries[i : i + 10])

        if handles:
            heard.ack.append(delete)
        yield heard


def _drop(client: Any, url: str, messages: list[dict[str, Any]], dead_letters: str | None) -> None:
    """Messages that name nothing readable: to the dead-letter queue (if any), then deleted."""
    for i in range(0, len(messages), 10):
        batch = list(enumerate(messages[i : i + 10]))
        if dead_letters:
            bodies = [{"Id": str(n), "MessageBody": str(m.get("Body") or "") or "(empty)"}
                      for n, m in batch]  # fmt: skip
            client.send_message_batch(QueueUrl=dead_letters, Entries=bodies)
        handles = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in batch]
        client.delete_message_batch(QueueUrl=url, Entries=handles)
