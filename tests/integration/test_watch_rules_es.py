"""A rules edit under ``retrieval-indexer watch`` holds what it changed at once, then reads
those documents again at once: those who keep access find them again without waiting for the
whole re-listing the edit asks for (design.md §16; docs/indexer.md, "a rules edit"). An edit
whose hold fails (Elasticsearch away) is kept and held once it answers again: never dropped,
so the permission history still names it.

The watcher runs as an operator runs it, against the real Elasticsearch. Which settle wrote
the new roles is read from the watcher's own lines (an order, never a time): the held
documents are re-tagged by a settle of their own before the re-listing that follows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from tests.integration.test_watch_es import (  # noqa: F401 (fixtures: share, watchers)
    RULES,
    Watching,
    folder_watcher,
    share,
    stored,
    until,
    watchers,
    write,
)
from tests.support import ES_URL
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.english_lines  # (it reads the watcher's English lines)


def _settles(said: str, since: int) -> list[tuple[str, int]]:
    """The watcher's settle lines after offset ``since``: (what, re-tagged)."""
    found = []
    for line in said[since:].splitlines():
        head, _, counts = line.partition(": ")
        what = head.split(" ", 1)[-1] if " " in head else ""
        if " re-tagged" in counts and what in ("events", "re-listing", "rules edit"):
            retagged = int(counts.split(" re-tagged")[0].rsplit(" ", 1)[-1])
            found.append((what, retagged))
    return found


def test_a_rules_edit_rewrites_what_it_held_before_the_re_listing(
    share: Path,  # noqa: F811
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
) -> None:
    kb = "watch-rules-read-again"
    for name in ("判决", "合同", "函件"):
        write(share, f"法务/{name}.md", f"# {name}\n\n法务部的{name}。")
    watcher = folder_watcher(share, alias, kb, "--rescan", "86400")
    watchers.append(watcher)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    legal = {f"法务/{n}.md" for n in ("判决", "合同", "函件")}
    until(lambda: {k for k, v in now().items() if v == ("法务",)} == legal, "first pass", watcher)
    until(lambda: "re-listing:" in watcher.said(), "the first re-listing reported", watcher)
    since = len(watcher.said())

    # 法务 keeps access, 总经理 gains it: the three are held, then written with both roles.
    (share.parent / "rules.yaml").write_text(RULES.replace("[法务]", "[法务, 总经理]"))
    both = tuple(sorted(("法务", "总经理")))
    until(lambda: all(now().get(k) == both for k in legal), "rules edit", watcher, now)
    assert now()["公共/合同.md"] == () and now()["公共/通知.md"] == ()
    until(lambda: any(w == "re-listing" for w, _ in _settles(watcher.said(), since)),
          "the re-listing the edit asked for", watcher)  # fmt: skip
    settles = _settles(watcher.said(), since)
    relisting = next(i for i, (what, _) in enumerate(settles) if what == "re-listing")
    # The held documents were re-tagged before the re-listing, which found them done.
    assert settles[0][0] == "rules edit", settles
    assert sum(n for what, n in settles[1:relisting] if what == "events") == 3, settles
    assert settles[relisting][1] == 0, settles
    assert watcher.stop() == 0, watcher.said()[-3000:]
    assert "Traceback" not in watcher.said()


def test_a_rules_edit_whose_hold_failed_is_held_and_recorded_once_elasticsearch_is_back(
    share: Path,  # noqa: F811
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
) -> None:
    kb = "watch-rules-es-away"
    db = f"sqlite:///{share.parent}/policy.db"
    history = PolicyDatabase(DEFAULT_MODEL, db)  # (its tables made before the watcher writes)
    since = datetime(2000, 1, 1, tzinfo=UTC)
    actions = lambda: [e.action for e in history.history(since=since)]  # noqa: E731
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    with TcpProxy(ES_URL) as proxy:
        watcher = folder_watcher(
            share, alias, kb, "--rescan", "86400", es_url=proxy.url, casbin_db=db
        )
        watchers.append(watcher)
        until(lambda: now() == {"公共/合同.md": (), "公共/通知.md": ()}, "first pass", watcher)
        until(lambda: "re-listing:" in watcher.said(), "the first re-listing reported", watcher)
        mark = len(watcher.said())
        proxy.cut()
        # 公共 narrowed to 法务 while Elasticsearch is away: its hold fails (or the lease
        # lapses first); the edit is kept, not dropped.
        (share.parent / "rules.yaml").write_text(
            RULES.replace("access_roles: []", "access_roles: [法务]"), encoding="utf-8"
        )
        failed = ("a rules edit not held", "waits for the lease again")
        until(lambda: any(f in watcher.said()[mark:] for f in failed),
              "the hold never failed", watcher)  # fmt: skip
        assert actions() == []
        proxy.restore()
        narrowed = {"公共/合同.md": ("法务",), "公共/通知.md": ("法务",)}
        until(lambda: now() == narrowed, "the edit held and read again", watcher, now)
        until(lambda: actions() == ["rules-changed"], "the rules-changed event", watcher,
              lambda: history.history(since=since))  # fmt: skip
        (event,) = history.history(since=since)
        assert (event.actor, event.source) == ("indexer:rules.yaml", "indexer")
        assert "2 re-tagged" in event.detail, event.detail
        assert watcher.stop() == 0, watcher.said()[-3000:]
    assert "Traceback" not in watcher.said()
