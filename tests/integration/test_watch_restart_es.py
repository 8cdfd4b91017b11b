"""A watcher started again finds what changed while none ran before its whole re-listing
(design.md §16, "in force in seconds"): the last listing it kept is compared with the folder
now, and what differs is narrowed first.

The watchers run in this process against the real Elasticsearch; the second one's whole
listing is held at a gate, so "before the re-listing" is an order the test sees, not a time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch

from indexer.permissions import load_rules
from indexer.pipeline import IndexOptions
from indexer.sources import ObjectRef, ObjectStoreOptions, ObjectStoreSource
from indexer.sources.local import LocalSource
from indexer.watch import last_listing
from indexer.watch import watcher as watcher_module
from indexer.watch.events import FileStamps, Heard
from indexer.watch.settle import Settled
from indexer.watch.watcher import Watcher, WatchOptions
from indexer.workers import ParserPool
from retrieval_svc.search.index import ensure_index
from retrieval_svc.tenancy import tenant_alias
from tests.integration.test_watch_pass_es import WAIT_S, Gated, heard_from, stored, until
from tests.support import S3_KEY_ID, S3_SECRET
from tests.support.corpus import TENANT
from tests.support.watch_share import public_share

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

OPEN = "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: []\n"
LEGAL = "  - match: 法务/**\n    access_roles: [法务]\n"


async def watched_once(
    es: AsyncElasticsearch, es_sync: Elasticsearch, source: LocalSource, options: IndexOptions,
    alias: str, count: int,
) -> None:  # fmt: skip
    """A first watcher runs until its whole re-listing is settled (and its listing kept),
    then stops."""
    reports: list[tuple[str, Settled]] = []
    first = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(first.run(stop))
    try:
        await until(lambda: any(what == "re-listing" for what, _ in reports), "a re-listing")
        assert len(stored(es_sync, options.alias, options.knowledge_id)) == count
    finally:
        stop.set()
        await running


@pytest.mark.parametrize("batch", [200, 2], ids=["one-batch", "batches-of-two"])
async def test_what_changed_while_no_watcher_ran_is_narrowed_before_the_whole_listing(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    batch: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (batches-of-two: the differences are looked at a few keys at a time, later batches
    # narrowed while the first one's pass runs)
    monkeypatch.setattr(watcher_module, "MANY_KEYS", batch)
    root = tmp_path / "share"
    for key in ("公共/甲.md", "公共/乙.md", "公共/丙.md", "公共/旧/丁.md", "公共/戊.md"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(f"# {key}\n\n第一版。", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(OPEN + LEGAL, encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = f"watch-restart-{batch}"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, LocalSource(root), options, alias, 5)

    # While no watcher runs: a move into 法务/, a deletion, a folder removed, a sidecar.
    (root / "法务").mkdir()
    (root / "公共/乙.md").rename(root / "法务/乙.md")
    (root / "公共/丙.md").unlink()
    (root / "公共/旧/丁.md").unlink()
    (root / "公共/旧").rmdir()
    (root / "公共/戊.md.meta.json").write_text('{"access_roles": ["人事"]}', encoding="utf-8")

    source = Gated(root)
    source.close("(listing)")  # (the whole listing waits until the test lets it go)
    second = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0)
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:

        def narrowed() -> bool:
            now = stored(es_sync, index, kb)
            gone = not {"公共/乙.md", "公共/丙.md", "公共/旧/丁.md"} & now.keys()
            return gone and now.get("公共/戊.md", ((), ""))[0] != ()

        await until(narrowed, "what changed while down is narrowed before the whole listing")
        assert not source.gates["(listing)"].is_set()
        assert stored(es_sync, index, kb)["公共/甲.md"][0] == ()  # (unchanged: left alone)

        source.gates["(listing)"].set()
        await until(
            lambda: (
                stored(es_sync, index, kb).get("法务/乙.md", ((), ""))[0] == ("法务",)
                and stored(es_sync, index, kb).get("公共/戊.md", ((), ""))[0] == ("人事",)
            ),
            "then written with their new roles",
        )
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_rules_edit_while_no_watcher_ran_is_held_before_the_whole_listing(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    root, rules = public_share(tmp_path, ("甲", "乙"), OPEN)
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-restart-rules"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, LocalSource(root), options, alias, 2)

    # While no watcher runs: 公共/ restricted to 法务 (the rules file is outside the folder).
    rules.write_text(OPEN.replace("access_roles: []", "access_roles: [法务]"), encoding="utf-8")
    source = Gated(root)
    source.close("(listing)")
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    second = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0)
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: all(roles != () for roles, _ in stored(es_sync, index, kb).values()),
            "the restricted folder answers no one before the whole listing",
        )
        assert not source.gates["(listing)"].is_set()
        source.gates["(listing)"].set()
        await until(
            lambda: all(r == ("法务",) for r, _ in stored(es_sync, index, kb).values()),
            "then written with 法务",
        )
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_restart_narrows_before_its_parser_workers_have_started(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker's start (its imports) takes seconds, far more on a busy machine: what narrows
    # reads nothing and must not wait for it; only what is then indexed does.
    root, rules = public_share(tmp_path, ("甲", "乙", "丙"), OPEN + LEGAL)
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-restart-workers"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, LocalSource(root), options, alias, 3)

    # While no watcher runs: one deleted, one given a sidecar that restricts it.
    (root / "公共/乙.md").unlink()
    (root / "公共/丙.md.meta.json").write_text('{"access_roles": ["人事"]}', encoding="utf-8")

    started = threading.Event()  # (the workers' start held until the test lets it go)

    class HeldPool(ParserPool):
        async def __aenter__(self) -> ParserPool:
            await asyncio.to_thread(started.wait, WAIT_S)
            return await super().__aenter__()

    monkeypatch.setattr(watcher_module, "ParserPool", HeldPool)
    second = Watcher(
        es, LocalSource(root), replace(options, workers=1), index_alias=alias,
        watch=WatchOptions(rescan_s=3600.0),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: (
                "公共/乙.md" not in (now := stored(es_sync, index, kb))
                and now.get("公共/丙.md", ((), ""))[0] != ()
            ),
            "narrowed while the parser workers are still starting",
        )
        assert not started.is_set()
        started.set()
        await until(
            lambda: stored(es_sync, index, kb).get("公共/丙.md", ((), ""))[0] == ("人事",),
            "then read by a worker and written with its new roles",
        )
    finally:
        started.set()
        stop.set()
        await running


async def test_a_restart_narrows_what_changed_before_holding_for_a_rules_edit(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A rules edit's hold may take many seconds (a folder of thousands of documents); the few
    # keys that changed while no watcher ran narrow in one and must not wait behind it.
    root = tmp_path / "share"
    for key in ("公共/甲.md", "公共/乙.md", "人事/丙.md"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(f"# {key}\n\n第一版。", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(OPEN + "  - match: 人事/**\n    access_roles: []\n", encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-restart-order"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, LocalSource(root), options, alias, 3)

    # While no watcher runs: 人事/ restricted by the rules file, and one document deleted.
    rules.write_text(OPEN + "  - match: 人事/**\n    access_roles: [人事]\n", encoding="utf-8")
    (root / "公共/乙.md").unlink()

    held = asyncio.Event()  # (the rules edit's hold waits until the test lets it go)
    real = watcher_module.narrow_rules

    async def narrow_rules_later(*args: object, **kwargs: object) -> Settled:
        await held.wait()
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watcher_module, "narrow_rules", narrow_rules_later)
    options = replace(options, acl_rules=load_rules(rules))
    second = Watcher(
        es, LocalSource(root), options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0)
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: "公共/乙.md" not in stored(es_sync, index, kb),
            "the deletion in force while the rules edit's hold still waits",
        )
        assert stored(es_sync, index, kb)["人事/丙.md"][0] == ()  # (its hold not yet run)
        held.set()
        await until(
            lambda: stored(es_sync, index, kb).get("人事/丙.md", ((), ""))[0] != (),
            "then the rules edit held, and written with 人事",
        )
    finally:
        held.set()
        stop.set()
        await running


async def test_a_rules_edit_while_down_is_held_though_the_file_changes_again_at_the_start(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rules edited while no watcher ran (公共/ restricted), and again while the new one starts
    # (人事/ restricted, heard before it compares with its kept listing): both are held —
    # the second edit does not make the first one's narrowing wait for the whole listing.
    root = tmp_path / "share"
    for key in ("公共/甲.md", "人事/乙.md"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(f"# {key}\n\n第一版。", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    hr_open = "  - match: 人事/**\n    access_roles: []\n"
    rules.write_text(OPEN + hr_open, encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-restart-rules-twice"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, LocalSource(root), options, alias, 2)

    legal = OPEN.replace("access_roles: []", "access_roles: [法务]")
    rules.write_text(legal + hr_open, encoding="utf-8")  # (while no watcher runs)
    options = replace(options, acl_rules=load_rules(rules))  # (what the new one reads first)
    files = FileStamps([rules])
    rules.write_text(legal + hr_open.replace("[]", "[人事]"), encoding="utf-8")  # (as it starts)

    real = last_listing.at_start

    async def after_the_second_edit_is_heard(*args: object) -> object:
        await until(lambda: second.options.acl_rules is not options.acl_rules, "heard")
        return await real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(last_listing, "at_start", after_the_second_edit_is_heard)
    source = Gated(root)
    source.close("(listing)")
    second = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        files=files, reload=lambda: replace(options, acl_rules=load_rules(rules)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: all(roles != () for roles, _ in stored(es_sync, index, kb).values()),
            "both folders answer no one before the whole listing",
        )
        assert not source.gates["(listing)"].is_set()
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


class GatedBucket(ObjectStoreSource):
    """A bucket whose whole listing waits until the test opens ``gate``."""

    def __init__(self, url: str, options: ObjectStoreOptions) -> None:
        super().__init__(url, options)
        self.gate = threading.Event()

    def list(self) -> Iterator[ObjectRef]:
        listed = list(super().list())
        self.gate.wait(WAIT_S)
        return iter(listed)


async def test_a_buckets_rules_edit_while_down_is_held_before_the_whole_listing(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    bucket: tuple[Any, str],
    s3_server: str,
) -> None:
    # A bucket keeps no stamps (its events wait in its queue), but the rules in force at its
    # last whole listing are kept: an edit made while no watcher ran is held at the start.
    client, name = bucket
    for key in ("公共/甲.md", "公共/乙.md"):
        client.put_object(Bucket=name, Key=key, Body=f"# {key}\n\n第一版。".encode())
    s3 = ObjectStoreOptions(
        endpoint=s3_server, region="us-east-1", access_key_id=S3_KEY_ID,
        secret_access_key=S3_SECRET,
    )  # fmt: skip
    rules = tmp_path / "rules.yaml"
    rules.write_text(OPEN, encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-restart-bucket-rules"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    await watched_once(es, es_sync, ObjectStoreSource(f"s3://{name}", s3), options, alias, 2)

    rules.write_text(OPEN.replace("access_roles: []", "access_roles: [法务]"), encoding="utf-8")
    source = GatedBucket(f"s3://{name}", s3)
    options = replace(options, acl_rules=load_rules(rules))
    second = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0)
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: all(roles != () for roles, _ in stored(es_sync, index, kb).values()),
            "the restricted folder answers no one before the whole listing",
        )
        assert not source.gate.is_set()
        source.gate.set()
        await until(
            lambda: all(r == ("法务",) for r, _ in stored(es_sync, index, kb).values()),
            "then written with 法务",
        )
    finally:
        source.gate.set()
        stop.set()
        await running


async def test_what_is_heard_before_a_whole_listing_is_narrowed_before_it_is_compared(
    tmp_path: Path,
    es: AsyncElasticsearch,
    es_sync: Elasticsearch,
    alias: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A change heard while the watcher starts (or while a re-listing is due) is narrowed at
    # once, not folded into the whole listing, whose comparison takes a minute at 100,000
    # objects.
    root, _ = public_share(tmp_path, ("甲", "乙"), None)
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    kb = "watch-heard-before-listing"
    options = IndexOptions(knowledge_id=kb, alias=index, tenant=TENANT, workers=0)
    await watched_once(es, es_sync, LocalSource(root), options, alias, 2)

    (root / "公共/乙.md").unlink()  # (heard as the new watcher starts)

    async def nothing_kept(*_args: object) -> None:  # (a first start, or a bucket's)
        return None

    monkeypatch.setattr(last_listing, "at_start", nothing_kept)
    heard: asyncio.Queue[Heard] = asyncio.Queue()
    heard.put_nowait(Heard({"公共/乙.md"}, at=0.0))
    source = Gated(root)
    source.close("(listing)")
    second = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(second.run(stop))
    try:
        await until(
            lambda: "公共/乙.md" not in stored(es_sync, index, kb),
            "the deletion heard is in force before the whole listing is compared",
        )
        assert not source.gates["(listing)"].is_set()
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running
