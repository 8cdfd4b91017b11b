"""A rules edit under ``retrieval-indexer watch`` holds what it changed at once, then reads
those documents again at once: those who keep access find them again without waiting for the
whole re-listing the edit asks for (design.md §16; docs/indexer.md, "a rules edit").

The watcher runs as an operator runs it, against the real Elasticsearch. Which settle wrote
the new roles is read from the watcher's own lines (an order, never a time): the held
documents are re-tagged by a settle of their own before the re-listing that follows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

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
