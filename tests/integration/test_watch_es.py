"""A change at the source in force while people ask (design.md §16, "in force in seconds"):
``retrieval-indexer watch`` as an operator runs it, against the real Elasticsearch and the
suite's S3 server with its SQS notifications.

Each test changes the source the way a company does — a file moved into a restricted folder, a
deletion, a sidecar, a rules file, a new document — and waits (a generous deadline, never a
timing assertion: the benchmark measures the window) until the index agrees with the source.
Events and the re-listing alone are each tested for a folder and for a bucket; so are a
watcher killed and restarted, Elasticsearch going away for a while, and two watchers of one
source (the second waits for the first's lease).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from tests.support import ES_URL, S3_KEY_ID, S3_SECRET
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]
RULES = """
unmatched: refuse
rules:
  - match: 公共/**
    access_roles: []
  - match: 法务/**
    access_roles: [法务]
"""
DEADLINE_S = 90.0  # (a busy CI machine: the benchmark, not this, measures the seconds)


def env(alias: str, es_url: str = ES_URL, s3: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "AWS_ENDPOINT_URL": s3,
        "AWS_ACCESS_KEY_ID": S3_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_REGION": "us-east-1",
    }


class Watching:
    """A ``retrieval-indexer watch`` process of the test's, stopped at the end."""

    def __init__(self, argv: list[str], environ: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("ab")
        self.process = subprocess.Popen(
            [*CLI, "watch", *argv], env=environ, stdout=self._out, stderr=subprocess.STDOUT
        )

    def stop(self, how: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(how)
        try:
            return self.process.wait(timeout=60)
        finally:
            self._out.close()

    def said(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def watchers() -> Iterator[list[Watching]]:
    started: list[Watching] = []
    yield started
    for watcher in started:
        watcher.stop(signal.SIGKILL)


def stored(es: Elasticsearch, alias: str, kb: str) -> dict[str, tuple[str, ...]]:
    """Each stored document's name → the roles its chunks hold (``()``: public)."""
    es.indices.refresh(index=f"{alias}.*", ignore_unavailable=True, allow_no_indices=True)
    found = es.options(ignore_status=(404, 503)).search(
        index=f"{alias}.*",
        query={"term": {"knowledge_id": kb}},
        size=1000,
        source=["document_name", "access_roles"],
    )
    out: dict[str, set[tuple[str, ...]]] = {}
    for hit in found.body.get("hits", {}).get("hits", []):
        doc = hit["_source"]
        roles = tuple(sorted(doc.get("access_roles") or ()))
        out.setdefault(doc["document_name"], set()).add(roles)
    return {name: min(held) if len(held) == 1 else ("mixed",) for name, held in out.items()}


def until(
    what: Callable[[], bool], why: str, watcher: Watching | None = None, shows: Any = None
) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.2)
    seen = shows() if shows else ""
    raise AssertionError(f"{why}: {seen}\n{watcher.said()[-3000:] if watcher else ''}")


def write(root: Path, key: str, text: str) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def share(tmp_path: Path) -> Path:
    root = tmp_path / "share"
    write(root, "公共/合同.md", "# 合同\n\n保密条款。")
    write(root, "公共/通知.md", "# 通知\n\n下周停电。")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    return root


def folder_watcher(
    share: Path, alias: str, kb: str, *more: str, es_url: str = ES_URL, casbin_db: str = ""
) -> Watching:
    argv = [str(share), "--knowledge-id", kb, "--acl-rules", str(share.parent / "rules.yaml"),
            "--health-port", "0", "--workers", "1", *more]  # fmt: skip
    environ = {**env(alias, es_url), **({"RSVC_CASBIN_DB_URL": casbin_db} if casbin_db else {})}
    return Watching(argv, environ, share.parent / f"{kb}.log")


@pytest.mark.parametrize("events", ["events", "re-listing alone"])
def test_a_folder_s_changes_reach_the_index_narrowing_first(
    share: Path, alias: str, es_sync: Elasticsearch, watchers: list[Watching], events: str
) -> None:
    kb = "watch-folder-" + ("ev" if events == "events" else "rl")
    more = ["--rescan", "600"] if events == "events" else ["--events", "none", "--rescan", "2"]
    db = f"sqlite:///{share.parent}/policy.db"
    history = PolicyDatabase(DEFAULT_MODEL, db)  # (its tables made before the watcher writes)
    watcher = folder_watcher(share, alias, kb, *more, casbin_db=db)
    watchers.append(watcher)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    until(lambda: now() == {"公共/合同.md": (), "公共/通知.md": ()}, "first pass", watcher)
    # A contract moved into 法务/: it leaves 公共 and comes back with 法务's role.
    (share / "法务").mkdir()
    (share / "公共/合同.md").rename(share / "法务/合同.md")
    until(lambda: now() == {"法务/合同.md": ("法务",), "公共/通知.md": ()}, "move", watcher)
    # A sidecar narrows a public notice; a new document appears; a deletion.
    (share / "公共/通知.md.meta.json").write_text('{"access_roles": ["董事会"]}')
    write(share, "公共/新闻.md", "# 新闻\n\n新大楼启用。")
    until(lambda: now().get("公共/通知.md") == ("董事会",), "sidecar", watcher)
    until(lambda: now().get("公共/新闻.md") == (), "new document", watcher)
    (share / "公共/新闻.md").unlink()
    until(lambda: "公共/新闻.md" not in now(), "deletion", watcher)
    # The rules file changes: what it affects is re-tagged, and the permission history says
    # so, as it does for `index`.
    (share.parent / "rules.yaml").write_text(RULES.replace("[法务]", "[法务, 总经理]"))
    both = tuple(sorted(("法务", "总经理")))
    until(lambda: now().get("法务/合同.md") == both, "rules", watcher, now)
    since = datetime(2000, 1, 1, tzinfo=UTC)
    until(lambda: [e.action for e in history.history(since=since)] == ["rules-changed"],
          "the rules-changed event", watcher, lambda: history.history(since=since))  # fmt: skip
    (event,) = history.history(since=since)
    assert (event.actor, event.source) == ("indexer:rules.yaml", "indexer")
    assert "1 re-tagged" in event.detail and "rules.yaml changed" in event.detail, event.detail
    assert watcher.stop() == 0, watcher.said()[-3000:]
    assert "Traceback" not in watcher.said()


def test_a_watcher_killed_and_restarted_misses_nothing_and_two_never_work_at_once(
    share: Path, alias: str, es_sync: Elasticsearch, watchers: list[Watching]
) -> None:
    kb = "watch-restart"
    first = folder_watcher(share, alias, kb, "--lease-ttl", "5")
    watchers.append(first)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    until(lambda: len(now()) == 2, "first pass", first)
    second = folder_watcher(share, alias, kb, "--lease-ttl", "5")  # (the same source)
    watchers.append(second)
    until(lambda: "holds the lease of" in second.said(), "the second never waited", second)
    first.stop(signal.SIGKILL)  # (no goodbye: its lease lapses)
    (share / "公共/通知.md").unlink()  # (while no watcher works)
    write(share, "法务/判决.md", "# 判决\n\n胜诉。")
    until(lambda: now() == {"公共/合同.md": (), "法务/判决.md": ("法务",)}, "takeover", second)
    assert second.stop() == 0


def test_elasticsearch_away_for_a_while_misses_nothing(
    share: Path, alias: str, es_sync: Elasticsearch, watchers: list[Watching]
) -> None:
    kb = "watch-es-away"
    with TcpProxy(ES_URL) as proxy:
        watcher = folder_watcher(share, alias, kb, es_url=proxy.url)
        watchers.append(watcher)
        now = lambda: stored(es_sync, alias, kb)  # noqa: E731
        until(lambda: len(now()) == 2, "first pass", watcher)
        proxy.cut()
        (share / "公共/合同.md").unlink()
        write(share, "公共/公告.md", "# 公告\n\n放假。")
        until(lambda: "trying again" in watcher.said(), "the watcher never noticed", watcher)
        time.sleep(3)  # (Elasticsearch stays away a while: the events are kept)
        proxy.restore()
        until(lambda: now() == {"公共/通知.md": (), "公共/公告.md": ()}, "after", watcher)
        assert watcher.stop() == 0


@pytest.fixture
def queue(bucket: tuple[Any, str], s3_server: str) -> tuple[Any, str, str]:
    """The bucket's event notifications into an SQS queue on the suite's S3 server: the
    bucket's client, its name, and the queue's name."""
    import boto3

    client, name = bucket
    sqs = boto3.client("sqs", endpoint_url=s3_server, region_name="us-east-1",
                       aws_access_key_id=S3_KEY_ID, aws_secret_access_key=S3_SECRET)  # fmt: skip
    queue_name = f"{name}-events"
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    client.put_bucket_notification_configuration(
        Bucket=name,
        NotificationConfiguration={"QueueConfigurations": [{
            "QueueArn": arn["QueueArn"],
            "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"],
        }]},
    )  # fmt: skip
    return client, name, queue_name


@pytest.mark.parametrize("events", ["events", "re-listing alone"])
def test_a_bucket_s_changes_reach_the_index_narrowing_first(
    queue: tuple[Any, str, str],
    s3_server: str,
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],
    tmp_path: Path,
    events: str,
) -> None:
    client, name, queue_name = queue

    def put(key: str, text: str, tags: dict[str, str] | None = None) -> None:
        client.put_object(Bucket=name, Key=f"docs/{key}", Body=text.encode())
        if tags:
            client.put_object_tagging(Bucket=name, Key=f"docs/{key}", Tagging={
                "TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]})  # fmt: skip

    put("公共/合同.md", "# 合同\n\n保密条款。")
    put("公共/年报 2026.md", "# 年报\n\n利润。", {"access_roles": "财务"})
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    kb = "watch-bucket-" + ("ev" if events == "events" else "rl")
    more = ["--events", f"sqs://{queue_name}", "--rescan", "600"] if events == "events" else [
        "--events", "none", "--rescan", "2"]  # fmt: skip
    rules = str(tmp_path / "rules.yaml")
    argv = [f"s3://{name}/docs", "--knowledge-id", kb, "--acl-rules", rules, "--roles-tag",
            "access_roles", "--health-port", "0", "--workers", "1", *more]  # fmt: skip
    watcher = Watching(argv, env(alias, s3=s3_server), tmp_path / "watch.log")
    watchers.append(watcher)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    until(lambda: now() == {"公共/合同.md": (), "公共/年报 2026.md": ("财务",)}, "first", watcher)
    client.copy_object(Bucket=name, Key="docs/法务/合同.md",
                       CopySource={"Bucket": name, "Key": "docs/公共/合同.md"})  # fmt: skip
    client.delete_object(Bucket=name, Key="docs/公共/合同.md")  # (a move, as S3 moves)
    until(lambda: now().get("法务/合同.md") == ("法务",) and "公共/合同.md" not in now(),
          "move", watcher)  # fmt: skip
    client.put_object_tagging(Bucket=name, Key="docs/公共/年报 2026.md", Tagging={
        "TagSet": [{"Key": "access_roles", "Value": "董事会"}]})  # fmt: skip
    until(lambda: now().get("公共/年报 2026.md") == ("董事会",), "tag", watcher)
    assert watcher.stop() == 0, watcher.said()[-3000:]
    assert "Traceback" not in watcher.said()


def test_the_watcher_s_status_is_shown(
    share: Path, alias: str, es_sync: Elasticsearch, watchers: list[Watching]
) -> None:
    kb = "watch-status"
    watcher = folder_watcher(share, alias, kb)
    watchers.append(watcher)
    until(lambda: len(stored(es_sync, alias, kb)) == 2, "first pass", watcher)
    (share / "公共/通知.md").unlink()

    def shown() -> dict[str, Any]:
        run = subprocess.run([*CLI, "show", "--knowledge-id", kb, "--json"], env=env(alias),
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        return dict(json.loads(run.stdout).get("last_run") or {})

    def settled() -> bool:  # (the record is written every 10 s: one may fall between the
        # event heard and its narrowing accounted, or before the start's re-listing is)
        (status,) = shown().get("watchers") or [{}]
        return bool(status.get("last_event_at") and status.get("last_relisting_at")) and (
            status.get("lag_narrowed_s") is not None
        )

    until(settled, "status", watcher, shown)
    (status,) = shown()["watchers"]
    assert status["state"] in ("watching", "settling", "re-listing"), status
    assert status["last_relisting_at"] and status["lag_narrowed_s"] is not None, status
    assert watcher.stop() == 0
