"""What is heard while the watcher indexes a long pass is narrowed at once, not after it
(design.md §16, "narrowing first"), and the pass never writes back what it read before.

The watcher runs in this process against the real Elasticsearch, over a folder whose reads the
test holds at a gate: a pass is kept running exactly as long as the test needs, without timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch

from indexer.permissions import load_rules
from indexer.pipeline import IndexOptions
from indexer.sources import ObjectRef
from indexer.sources.local import LocalSource
from indexer.watch.events import FileStamps, Heard
from indexer.watch.settle import Settled
from indexer.watch.watcher import MANY_KEYS, Watcher, WatchOptions
from retrieval_svc.search.index import ensure_index
from retrieval_svc.tenancy import tenant_alias
from tests.support.corpus import TENANT
from tests.support.watch_share import public_share

pytestmark = pytest.mark.anyio

KB = "watch-pass"
WAIT_S = 60.0  # (a generous deadline on a busy machine: nothing here is timed)


class Gated(LocalSource):
    """A folder whose reads of the gated keys wait until the test opens their gate."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gates: dict[str, threading.Event] = {}
        self.entered: dict[str, threading.Event] = {}

    def close(self, key: str) -> None:
        self.gates[key], self.entered[key] = threading.Event(), threading.Event()

    def list(self) -> Iterator[ObjectRef]:
        """The listing as it is now, handed over once the test opens the listing's gate (as a
        long listing's first pages are older than its last)."""
        listed = list(super().list())
        if "(listing)" in self.gates:
            self.entered["(listing)"].set()
            self.gates["(listing)"].wait(WAIT_S)
        return iter(listed)

    def read(self, ref: ObjectRef) -> bytes:
        if ref.key in self.gates:
            self.entered[ref.key].set()
            self.gates[ref.key].wait(WAIT_S)
        return super().read(ref)


def stored(es: Elasticsearch, alias: str, kb: str = KB) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each stored document of ``kb``: its name → its roles and content."""
    es.indices.refresh(index=alias)
    hits = es.search(index=alias, query={"term": {"knowledge_id": kb}}, size=100)
    return {
        h["_source"]["document_name"]: (
            tuple(h["_source"].get("access_roles") or ()),
            h["_source"]["content"],
        )
        for h in hits["hits"]["hits"]
    }


def heard_from(queue: asyncio.Queue[Heard]) -> Callable[[asyncio.Event], AsyncIterator[Heard]]:
    """The watcher's events: what the test puts on ``queue``."""

    async def events(stop: asyncio.Event) -> AsyncIterator[Heard]:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                yield await asyncio.wait_for(queue.get(), timeout=0.2)

    return events


async def until(check: object, why: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.1)
    assert check(), why  # type: ignore[operator]


async def started(reports: list[tuple[str, Settled]]) -> None:
    """The start's re-listing over, its report said. Its documents are searchable before it
    reports (it keeps its listing first): a test that counts the reports after one moment
    must wait for this one, or it may count the start's re-listing as its own pass."""
    await until(lambda: any(what == "re-listing" for what, _ in reports), "the start re-listed")


async def test_a_move_heard_during_a_long_pass_is_in_force_before_the_pass_ends(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    (root / "公共/甲.md").write_text("# 甲\n\n第一版。", encoding="utf-8")
    (root / "公共/乙.md").write_text("# 乙\n\n第一版。", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: []\n"
        "  - match: 法务/**\n    access_roles: [法务]\n",
        encoding="utf-8",
    )
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    source = Gated(root)
    options = IndexOptions(
        knowledge_id=KB, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    heard: asyncio.Queue[Heard] = asyncio.Queue()

    reports: list[tuple[str, Settled]] = []
    watcher = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard), said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await started(reports)
        await until(lambda: len(stored(es_sync, index)) == 2, "the first pass indexes both")

        # A pass that edits both, held at the gate while reading 甲 (乙 is read beside it).
        source.close("公共/甲.md")
        for name in ("甲", "乙"):
            (root / f"公共/{name}.md").write_text(f"# {name}\n\n第二版。", encoding="utf-8")
        await heard.put(Heard({"公共/甲.md", "公共/乙.md"}, at=0.0))
        await asyncio.to_thread(source.entered["公共/甲.md"].wait, WAIT_S)
        passes = len(reports)

        # 乙 moved into 法务/ while the pass is held: gone from 公共/ at once.
        source.close("法务/乙.md")
        (root / "法务").mkdir()
        (root / "公共/乙.md").rename(root / "法务/乙.md")
        await heard.put(Heard({"公共/乙.md", "法务/乙.md"}, at=0.0))
        await until(
            lambda: "公共/乙.md" not in stored(es_sync, index), "the move narrowed mid-pass"
        )
        assert not source.gates["公共/甲.md"].is_set()  # (the pass was still running)

        # The pass ends; it wrote 甲's second version and not 乙's old copy (fenced).
        source.gates["公共/甲.md"].set()
        await asyncio.to_thread(source.entered["法务/乙.md"].wait, WAIT_S)
        after = stored(es_sync, index)
        assert "公共/乙.md" not in after and "第二版" in after["公共/甲.md"][1]
        written = [done.report.documents_indexed for _, done in reports[passes:] if done.report]
        assert written[0] == 1, f"the pass wrote {written[0]} documents; 乙 was fenced"

        # Then 乙 is read again where it is now, with its new folder's roles.
        source.gates["法务/乙.md"].set()
        await until(
            lambda: stored(es_sync, index).get("法务/乙.md", ((), ""))[0] == ("法务",),
            "乙 indexed in 法务/ after the pass",
        )
        assert "公共/乙.md" not in stored(es_sync, index)
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_rules_edit_during_a_long_pass_narrows_at_once_and_spares_the_pass_s_work(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    public = "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: []\n"
    root, rules = public_share(tmp_path, ("乙", "丁"), public)
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    source = Gated(root)
    kb = KB + "-rules"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    heard: asyncio.Queue[Heard] = asyncio.Queue()

    reports: list[tuple[str, Settled]] = []
    watcher = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard), files=FileStamps([rules]),
        reload=lambda: replace(options, acl_rules=load_rules(rules)),
        said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await started(reports)
        await until(lambda: len(stored(es_sync, index, kb)) == 2, "the first pass indexes both")
        # A pass held at the gate: a new 甲 (read first, held there) and 丁's second version.
        source.close("公共/甲.md")
        (root / "公共/甲.md").write_text("# 甲\n\n新文档。", encoding="utf-8")
        (root / "公共/丁.md").write_text("# 丁\n\n第二版。", encoding="utf-8")
        await heard.put(Heard({"公共/甲.md", "公共/丁.md"}, at=0.0))
        await asyncio.to_thread(source.entered["公共/甲.md"].wait, WAIT_S)
        passes = len(reports)

        # The rules restrict 乙 while the pass is held: 乙 answers no one at once.
        rules.write_text(
            public.replace("rules:\n", "rules:\n  - match: 公共/乙.md\n    access_roles: [人事]\n"),
            encoding="utf-8",
        )
        await until(
            lambda: stored(es_sync, index, kb)["公共/乙.md"][0] != (), "乙 narrowed mid-pass"
        )
        assert not source.gates["公共/甲.md"].is_set()  # (the pass was still running)

        # The pass writes 甲 and 丁 (the new rules leave 丁 as the pass read it: not fenced);
        # then 乙 is written with its new roles.
        source.gates["公共/甲.md"].set()
        await until(
            lambda: stored(es_sync, index, kb)["公共/乙.md"][0] == ("人事",), "乙 re-tagged"
        )
        after = stored(es_sync, index, kb)
        assert after["公共/丁.md"][0] == () and "第二版" in after["公共/丁.md"][1]
        assert after["公共/甲.md"][0] == ()
        written = [done.report.documents_indexed for _, done in reports[passes:] if done.report]
        assert written and written[0] == 2, written
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_new_document_restricted_while_a_pass_reads_it_is_never_written_wide(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    (root / "公共/甲.md").write_text("# 甲\n\n已有的文档。", encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    source = Gated(root)
    kb = KB + "-new"
    options = IndexOptions(knowledge_id=kb, alias=index, tenant=TENANT, workers=0)
    heard: asyncio.Queue[Heard] = asyncio.Queue()
    reports: list[tuple[str, Settled]] = []
    watcher = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard), said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await started(reports)
        await until(lambda: len(stored(es_sync, index, kb)) == 1, "the first pass indexes 甲")
        # A new document, public as the pass reads it (held at the gate) …
        source.close("公共/新.md")
        (root / "公共/新.md").write_text("# 新\n\n薪酬调整方案。", encoding="utf-8")
        await heard.put(Heard({"公共/新.md"}, at=0.0))
        await asyncio.to_thread(source.entered["公共/新.md"].wait, WAIT_S)
        passes = len(reports)
        # … given a sidecar naming 人事 before the pass writes it: nothing to hold (it is not
        # stored yet), but the pass's copy is older than the change.
        (root / "公共/新.md.meta.json").write_text('{"access_roles": ["人事"]}', "utf-8")
        await heard.put(Heard({"公共/新.md", "公共/新.md.meta.json"}, at=0.0))
        await until(lambda: len(reports) > passes, "the change looked at during the pass")
        source.gates["公共/新.md"].set()
        await until(
            lambda: stored(es_sync, index, kb).get("公共/新.md", ((), ""))[0] == ("人事",),
            "新 written with the sidecar's roles after the pass",
        )
        written = [done.report.documents_indexed for _, done in reports[passes:] if done.report]
        assert written[0] == 0, "the pass wrote its public copy of 新 (it was fenced)"
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_move_heard_while_a_re_listing_lists_is_in_force_before_the_listing_ends(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    (root / "法务").mkdir()
    for name in ("甲", "乙"):
        (root / f"公共/{name}.md").write_text(f"# {name}\n\n正文。", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: []\n"
        "  - match: 法务/**\n    access_roles: [法务]\n",
        encoding="utf-8",
    )
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    source = Gated(root)
    kb = KB + "-listing"
    options = IndexOptions(
        knowledge_id=kb, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    heard: asyncio.Queue[Heard] = asyncio.Queue()
    reports: list[tuple[str, Settled]] = []
    watcher = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard), said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await started(reports)
        await until(lambda: len(stored(es_sync, index, kb)) == 2, "the first pass indexes both")
        # A re-listing (more keys heard at once than are worth a look each), held while it
        # lists the source — as a bucket of 100,000 objects takes a while to list.
        source.close("(listing)")
        await heard.put(Heard({f"公共/未知-{i}.md" for i in range(MANY_KEYS + 1)}, at=0.0))
        await asyncio.to_thread(source.entered["(listing)"].wait, WAIT_S)
        # 乙 moved into 法务/ meanwhile: gone from 公共/ at once, the listing still held.
        (root / "公共/乙.md").rename(root / "法务/乙.md")
        await heard.put(Heard({"公共/乙.md", "法务/乙.md"}, at=0.0))
        await until(
            lambda: "公共/乙.md" not in stored(es_sync, index, kb), "the move narrowed mid-listing"
        )
        assert not source.gates["(listing)"].is_set()  # (the listing was still held)
        source.gates["(listing)"].set()
        await until(
            lambda: stored(es_sync, index, kb).get("法务/乙.md", ((), ""))[0] == ("法务",),
            "乙 indexed in 法务/ after the re-listing",
        )
        assert set(stored(es_sync, index, kb)) == {"公共/甲.md", "法务/乙.md"}
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


@dataclass
class Share:
    """A watched folder of one document (公共/甲.md) behind gates, and what its re-listings
    left in the index (the moment each was over)."""

    root: Path
    source: Gated
    heard: asyncio.Queue[Heard]
    watcher: Watcher
    stored: Callable[[], set[str]]
    relistings: list[set[str]]

    async def hold_a_re_listing(self) -> None:
        """A re-listing started (many keys heard at once) and held at its listing."""
        self.source.close("(listing)")
        await self.heard.put(Heard({f"公共/未知-{i}.md" for i in range(MANY_KEYS + 1)}, at=0.0))
        await asyncio.to_thread(self.source.entered["(listing)"].wait, WAIT_S)

    async def write(self, key: str, text: str) -> None:
        (self.root / key).write_text(text, encoding="utf-8")
        await self.heard.put(Heard({key}, at=0.0))


@contextlib.asynccontextmanager
async def watched_share(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str, kb: str
) -> AsyncIterator[Share]:
    """The share watched in this process until the test is over (its first re-listing done),
    every gate then opened."""
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    (root / "公共/甲.md").write_text("# 甲\n\n正文。", encoding="utf-8")
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    source = Gated(root)
    options = IndexOptions(knowledge_id=kb, alias=index, tenant=TENANT, workers=0)
    heard: asyncio.Queue[Heard] = asyncio.Queue()
    relistings: list[set[str]] = []

    def said(what: str, _done: Settled) -> None:
        if what == "re-listing":  # (what the index holds the moment a re-listing is over)
            relistings.append(set(stored(es_sync, index, kb)))

    watcher = Watcher(
        es, source, options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        events=heard_from(heard), said=said,
    )  # fmt: skip
    share = Share(root, source, heard, watcher, lambda: set(stored(es_sync, index, kb)), relistings)
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await until(lambda: len(relistings) == 1, "the first re-listing")
        yield share
    finally:
        for gate in source.gates.values():
            gate.set()
        stop.set()
        await running


async def test_a_new_document_heard_while_a_re_listing_runs_is_indexed_beside_it(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    async with watched_share(tmp_path, es, es_sync, alias, KB + "-beside") as share:
        # A re-listing whose listing (taken before 丙 existed) is held at the gate …
        await share.hold_a_re_listing()
        # … and a new document heard meanwhile: indexed beside it, not after it.
        await share.write("公共/丙.md", "# 丙\n\n新文档。")
        await until(lambda: "公共/丙.md" in share.stored(), "丙 indexed during the re-listing")
        assert not share.source.gates["(listing)"].is_set()  # (the re-listing was still held)
        # The re-listing's older listing does not take 丙 for gone.
        share.source.gates["(listing)"].set()
        await until(lambda: len(share.relistings) == 2, "the re-listing ends")
        assert share.relistings[1] == {"公共/甲.md", "公共/丙.md"}


async def test_what_is_heard_during_an_events_pass_is_settled_after_it_not_after_a_re_listing(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    # A re-listing of a large bucket can take minutes: a document heard while an events pass
    # runs beside it must not wait for the re-listing, only for the events pass.
    async with watched_share(tmp_path, es, es_sync, alias, KB + "-after-events") as share:
        await share.hold_a_re_listing()  # a re-listing held at its listing …
        share.source.close("公共/乙.md")  # … an events pass beside it, held reading 乙 …
        await share.write("公共/乙.md", "# 乙\n\n新文档。")
        await asyncio.to_thread(share.source.entered["公共/乙.md"].wait, WAIT_S)
        await share.write("公共/丙.md", "# 丙\n\n又一个新文档。")  # … and 丙 heard meanwhile
        await until(lambda: share.watcher.narrowed.keys, "丙 narrowed while the events pass runs")
        share.source.gates["公共/乙.md"].set()
        await until(
            lambda: {"公共/乙.md", "公共/丙.md"} <= share.stored(),
            "乙 and 丙 indexed while the re-listing still lists",
        )
        assert not share.source.gates["(listing)"].is_set()
        share.source.gates["(listing)"].set()
        await until(lambda: len(share.relistings) == 2, "the re-listing ends")
        assert share.relistings[1] == {"公共/甲.md", "公共/乙.md", "公共/丙.md"}
