"""What a bucket's event messages name, read as untrusted input: a queue or an HTTP listener
receives whatever anyone sends it, so every message is read on its own within ``Limits``
(its size, its nesting, its records), every record on its own, and nothing it holds can raise.
A message or record that cannot be read is returned as a *problem* (a reason code of
``PROBLEMS``) beside the keys the rest of it names: the caller names it and drops it, and the
rest of its batch is settled.

Read, and the envelopes they come in (unwrapped at most ``HOPS`` deep):

* S3's records, ``{"Records": [{"eventTime", "s3": {"bucket": {"name"}, "object": {"key"}}}]}``
  (keys URL-encoded, spaces as ``+``): as S3 queues them in SQS, as MinIO's webhook posts them
  (its ``EventName`` and ``Key`` beside), through SNS (``{"Type", "Message": "<json>"}``);
* AWS EventBridge's, ``{"detail-type", "time", "detail": {"bucket", "object": {"key"}}}``
  (keys as stored);
* OSS's, ``{"events": [{"eventTime", "oss": {"bucket": {"name"}, "object": {"key"}}}]}``
  (keys as stored), which MNS delivers base64-encoded — a queue message's body, or the
  ``Message`` of its HTTP notification (XML ``<Notification>``, or JSON) — and Alibaba Cloud
  EventBridge as a CloudEvents envelope whose ``data`` is one OSS event record.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus
from xml.etree import ElementTree

from indexer.passing_over import SIDECAR_SUFFIX

HOPS = 3  # envelopes inside envelopes (SNS → S3; MNS XML → base64 → OSS)
# An event's own time is believed between these bounds of the time it is read (SQS keeps a
# message 14 days at most; another host's clock may run a little ahead): outside them (1970, a
# year 9999, a sender's wrong clock) the time it was received stands for it.
MAX_AGE_S = 14 * 24 * 3600.0
AHEAD_S = 300.0

# Why a message or a record was not read (the metric's label, the word table's rows).
PROBLEMS = ("too_large", "too_deep", "not_json", "not_an_event", "too_many_records", "bad_record")


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of one message is read at all."""

    body_bytes: int = 256 * 1024  # (SQS's own largest message; an S3 event is ~1 KiB)
    depth: int = 32  # (an S3 record nests 5 deep, MinIO's 6)
    records: int = 1000


LIMITS = Limits()


@dataclass(slots=True)
class Read:
    """What one message names under the prefix: document keys, the earliest event time, and
    a problem per part of it that could not be read."""

    keys: set[str] = field(default_factory=set)
    earliest: float | None = None
    problems: list[str] = field(default_factory=list)


class _Unreadable(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


_BASE64 = re.compile(rb"[A-Za-z0-9+/=\s]+")


def read_message(body: str | bytes, bucket: str, prefix: str, limits: Limits = LIMITS) -> Read:
    """The keys below ``prefix`` of ``bucket`` one message names (a sidecar's event names its
    document), and what in it could not be read. Never raises."""
    read = Read()
    try:
        for name, key, when in _targets(_decode(body, limits, HOPS), limits, read, HOPS):
            if name != bucket or not key.startswith(prefix) or key == prefix:
                continue
            read.keys.add(key[len(prefix) :].removesuffix(SIDECAR_SUFFIX))
            if when is not None:
                read.earliest = when if read.earliest is None else min(read.earliest, when)
    except _Unreadable as exc:
        read.problems.append(exc.problem)
    except Exception:  # (a shape no rule here foresaw: named, never raised into the batch)
        read.problems.append("bad_record")
    return read


def _decode(body: str | bytes, limits: Limits, hops: int) -> Any:
    """One message's text as JSON (XML and base64 envelopes opened), within the limits."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if len(raw) > limits.body_bytes:
        raise _Unreadable("too_large")
    text = raw.strip()
    if text.startswith(b"<") and hops > 0:  # (MNS's XML notification)
        return _decode(_xml_message(text), limits, hops - 1)
    try:
        doc = json.loads(text)
    except RecursionError:
        raise _Unreadable("too_deep") from None
    except ValueError:  # (not JSON, or not UTF-8: perhaps base64, as MNS sends OSS's events)
        if hops > 0 and text and _BASE64.fullmatch(text):
            try:
                decoded = base64.b64decode(text, validate=False)
            except (binascii.Error, ValueError):
                raise _Unreadable("not_json") from None
            return _decode(decoded, limits, hops - 1)
        raise _Unreadable("not_json") from None
    if not _within_depth(doc, limits.depth):
        raise _Unreadable("too_deep")
    return doc


def _xml_message(text: bytes) -> bytes:
    """The ``<Message>`` of an MNS HTTP notification (no document type: no entities)."""
    if b"<!" in text:
        raise _Unreadable("not_an_event")
    try:
        root = ElementTree.fromstring(text)
    except (ElementTree.ParseError, ValueError):
        raise _Unreadable("not_json") from None
    for element in root.iter():
        if element.tag.rpartition("}")[2] == "Message" and element.text:
            return element.text.encode("utf-8")
    raise _Unreadable("not_an_event")


def _within_depth(doc: Any, limit: int) -> bool:
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]
    return True


Target = tuple[str, str, float | None]  # bucket, key (decoded), event time


def _targets(doc: Any, limits: Limits, read: Read, hops: int) -> list[Target]:
    """The (bucket, key, time) each record of a decoded message names; a record that names
    none is a problem of its own."""
    if not isinstance(doc, dict):
        raise _Unreadable("not_an_event")
    message = doc.get("Message")
    if isinstance(message, str) and hops > 0:  # (SNS's envelope, MNS's JSON notification)
        return _targets(_decode(message, limits, hops - 1), limits, read, hops - 1)
    for records, encoded in ((doc.get("Records"), True), (doc.get("events"), False)):
        if records is None:
            continue
        if not isinstance(records, list):
            raise _Unreadable("not_an_event")
        if len(records) > limits.records:
            raise _Unreadable("too_many_records")
        return _each(records, encoded, read)
    if "specversion" in doc and "data" in doc:  # (a CloudEvent: Alibaba Cloud EventBridge)
        data = doc["data"]
        if isinstance(data, dict) and ("events" in data or "Records" in data):
            return _targets(data, limits, read, hops - 1)
        return _each([data], False, read)
    detail = doc.get("detail")
    if isinstance(detail, dict) and "object" in detail:  # (AWS EventBridge)
        record = {"eventTime": doc.get("time"), "s3": detail}
        return _each([record], False, read)
    if doc.get("Event") == "s3:TestEvent" or doc.get("EventName") == "s3:TestEvent":
        return []  # (sent once when notifications are configured)
    raise _Unreadable("not_an_event")


def _each(records: list[Any], encoded: bool, read: Read) -> list[Target]:
    targets: list[Target] = []
    for record in records:
        target = _target(record, encoded)
        if target is None:
            read.problems.append("bad_record")
        else:
            targets.append(target)
    return targets


def _target(record: Any, encoded: bool) -> Target | None:
    """One record's bucket, key and time; None when it names no object."""
    if not isinstance(record, dict):
        return None
    where = record.get("s3") if isinstance(record.get("s3"), dict) else record.get("oss")
    if not isinstance(where, dict):
        return None
    bucket, found = where.get("bucket"), where.get("object")
    if not isinstance(bucket, dict) or not isinstance(found, dict):
        return None
    name, key = bucket.get("name"), found.get("key")
    if not isinstance(name, str) or not isinstance(key, str) or not key:
        return None
    return name, unquote_plus(key) if encoded else key, _when(record.get("eventTime"))


def _when(stamp: Any) -> float | None:
    """An event's time, when it is believable (see ``MAX_AGE_S``); never after now."""
    if not isinstance(stamp, str) or len(stamp) > 64:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    now = time.time()
    if not now - MAX_AGE_S <= when <= now + AHEAD_S:
        return None
    return min(when, now)
