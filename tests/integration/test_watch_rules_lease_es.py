"""A rules edit whose hold the lease's loss interrupts is kept, not dropped: the next holding
of the lease holds it, and its ``rules`` report (the permission history's ``rules-changed``
event) still comes (design.md §16, "a rules edit").

The watcher runs in this process against the real Elasticsearch; the lease is lost by the
write guard a holder's writes check first (``indexer.lease``), raising as a taken lease does.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch

from indexer.lease import LeaseLost
from indexer.permissions import load_rules
from indexer.pipeline import IndexOptions
from indexer.sources.local import LocalSource
from indexer.store import HELD_ROLE
from indexer.watch.settle import Settled
from indexer.watch.watcher import Watcher, WatchOptions
from retrieval_svc.search.index import ensure_index
from retrieval_svc.tenancy import tenant_alias
from tests.integration.test_watch_pass_es import started, stored, until
from tests.support.corpus import TENANT
from tests.support.watch_share import public_share

pytestmark = pytest.mark.anyio

KB = "watch-rules-lease"
PUBLIC = "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: []\n"


async def test_a_rules_edit_whose_hold_lost_the_lease_is_held_by_the_next_holding(
    tmp_path: Path, es: AsyncElasticsearch, es_sync: Elasticsearch, alias: str
) -> None:
    root, rules = public_share(tmp_path, ("甲", "乙"), PUBLIC)
    index = tenant_alias(alias, TENANT)
    await ensure_index(es, alias, tenant=TENANT)
    options = IndexOptions(
        knowledge_id=KB, alias=index, tenant=TENANT, acl_rules=load_rules(rules), workers=0
    )
    reports: list[tuple[str, Settled]] = []
    watcher = Watcher(
        es, LocalSource(root), options, index_alias=alias, watch=WatchOptions(rescan_s=3600.0),
        said=lambda what, done: reports.append((what, done)),
    )  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(watcher.run(stop))
    try:
        await started(reports)
        await until(lambda: len(stored(es_sync, index, KB)) == 2, "the first pass indexes both")
    finally:
        stop.set()
        await running

    # 公共 narrowed to 法务; the lease is lost as the edit's hold is about to write.
    rules.write_text(PUBLIC.replace("[]", "[法务]"), encoding="utf-8")

    async def taken() -> None:
        raise LeaseLost("another writer holds the lease")

    before = watcher.options
    watcher.options = replace(options, acl_rules=load_rules(rules), guard=taken)
    watcher._rules_before = before
    with pytest.raises(LeaseLost):
        await watcher._narrow_rules()
    assert watcher._rules_before is before, "the edit was dropped with the lease"
    assert not any(what == "rules" for what, _ in reports)
    assert all(roles == () for roles, _ in stored(es_sync, index, KB).values())

    # The next holding holds it: both documents answer no one until read again, and the
    # edit is reported (the history's event).
    watcher.options = replace(watcher.options, guard=None)
    await watcher._narrow_rules()
    assert watcher._rules_before is None
    assert [what for what, _ in reports].count("rules") == 1
    assert sorted(watcher._rules_keys) == ["公共/乙.md", "公共/甲.md"]
    held = stored(es_sync, index, KB)
    assert {name: roles for name, (roles, _) in held.items()} == {
        "公共/甲.md": (HELD_ROLE,),
        "公共/乙.md": (HELD_ROLE,),
    }
