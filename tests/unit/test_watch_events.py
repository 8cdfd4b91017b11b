"""What the watcher hears (``indexer.watch.events``): S3's event records as S3 sends them
(keys URL-encoded, spaces as ``+``), wrapped by SNS, or as EventBridge sends them; keys of
another bucket or outside the prefix ignored; a sidecar's event naming its document."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from indexer.watch.events import FileStamps, Heard, document_key, queue_url
from indexer.watch.notices import read_message


def s3_record(
    bucket: str, key: str, name: str = "ObjectCreated:Put", at: str = ""
) -> dict[str, object]:
    at = at or datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"eventName": name, "eventTime": at,
            "s3": {"bucket": {"name": bucket}, "object": {"key": key}}}  # fmt: skip


def keys_of(body: object, bucket: str, prefix: str) -> tuple[set[str], float | None]:
    read = read_message(json.dumps(body), bucket, prefix)
    return read.keys, read.earliest


def test_s3_records_name_their_keys_under_the_prefix() -> None:
    body = {"Records": [
        s3_record("corp", "kb/%E6%B3%95%E5%8A%A1/%E5%90%88%E5%90%8C+2026.md"),
        s3_record("corp", "kb/a.md.meta.json", "ObjectCreated:Copy"),
        s3_record("corp", "other/b.md"),
        s3_record("elsewhere", "kb/c.md", "ObjectRemoved:Delete"),
    ]}  # fmt: skip
    keys, when = keys_of(body, "corp", "kb/")
    assert keys == {"法务/合同 2026.md", "a.md"}
    assert when is not None and when > 1.7e9


@pytest.mark.parametrize(
    "at",
    ["1970-01-01T00:00:01Z", "9999-12-31T23:59:59Z", "2001-01-01T00:00:00Z", "next-year"],
)
def test_an_event_time_that_cannot_be_true_is_not_believed(at: str) -> None:
    if at == "next-year":
        at = (datetime.now(UTC) + timedelta(days=365)).isoformat()
    keys, when = keys_of({"Records": [s3_record("corp", "kb/a.md", at=at)]}, "corp", "kb/")
    assert keys == {"a.md"} and when is None  # (the time it was received stands for it)


def test_an_event_time_a_little_ahead_is_read_as_now() -> None:
    ahead = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
    _, when = keys_of({"Records": [s3_record("corp", "kb/a.md", at=ahead)]}, "corp", "kb/")
    assert when is not None and when <= time.time()


def test_sns_and_eventbridge_envelopes_are_read_too() -> None:
    wrapped = {
        "Type": "Notification",
        "Message": json.dumps({"Records": [s3_record("corp", "kb/x.md")]}),
    }
    assert keys_of(wrapped, "corp", "kb/")[0] == {"x.md"}
    bridge = {
        "detail-type": "Object Deleted", "time": "2026-12-04T09:00:01Z",
        "detail": {"bucket": {"name": "corp"}, "object": {"key": "kb/法务/合同 2026.md"}},
    }  # fmt: skip
    assert keys_of(bridge, "corp", "kb/")[0] == {"法务/合同 2026.md"}
    assert keys_of({"Event": "s3:TestEvent"}, "corp", "kb/") == (set(), None)
    assert keys_of("not an object", "corp", "") == (set(), None)
    assert read_message('"not an object"', "corp", "").problems == ["not_an_event"]


def test_a_sidecar_names_its_document_and_heard_batches_join() -> None:
    assert document_key("人事/薪酬.xlsx.meta.json") == "人事/薪酬.xlsx"
    first, later = Heard({"a.md"}, 20.0), Heard({"b.md"}, 10.0)
    first.add(later)
    assert first.keys == {"a.md", "b.md"} and first.at == 10.0


@pytest.mark.parametrize("spec", ["kafka://topic", "sqs://", "queue"])
def test_a_queue_that_is_not_sqs_is_refused_saying_what_to_give(spec: str) -> None:
    with pytest.raises(ValueError, match="sqs://QUEUE-NAME"):
        queue_url(object(), spec)


def test_a_rules_file_copied_in_with_its_old_time_and_size_is_a_change(tmp_path: Path) -> None:
    rules = tmp_path / "acl-rules.yaml"
    rules.write_text("rules:\n  - {path: 'secret/**', roles: [hr]}\n", encoding="utf-8")
    before = rules.stat()
    stamps = FileStamps([rules])
    edited = tmp_path / "edited.yaml"  # (as `cp -p`, `rsync -a` or `tar x` put it in place)
    edited.write_text("rules:\n  - {path: 'secret/**', roles: [it]}\n", encoding="utf-8")
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(edited, rules)
    assert rules.stat().st_size == before.st_size
    assert rules.stat().st_mtime_ns == before.st_mtime_ns
    assert stamps.changed()  # (main: unchanged — the narrowing edit never in force)
    assert not stamps.changed()
    time.sleep(0.05)  # (past the kernel's coarse clock tick: the edit's change time is new)
    with rules.open("r+", encoding="utf-8") as file:  # (edited in place, its time put back)
        file.write("rules:\n  - {path: 'secret/**', roles: [hr]}\n")
    os.utime(rules, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert stamps.changed()
