"""A watched folder given through a link (``/srv/current`` → a release), the link swapped to
another folder by a deploy, and the nightly ``index --prune`` of the same path: the watcher
must not keep writing the folder it was started on back into the knowledge base."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from tests.integration.test_watch_es import (  # noqa: F401 (watchers: a fixture)
    CLI,
    RULES,
    Watching,
    env,
    stored,
    until,
    watchers,
    write,
)

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)


def test_a_root_link_swapped_to_another_folder_is_not_written_back(
    tmp_path: Path,
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
) -> None:
    kb = "watch-root-link"
    old, new = tmp_path / "releases" / "v1", tmp_path / "releases" / "v2"
    write(old, "公共/通知.md", "# 通知\n\n下周停电。")
    write(old, "公共/薪酬.md", "# 薪酬\n\n名单。")  # (moved to 法务 in the next release)
    write(new, "公共/通知.md", "# 通知\n\n下周停电。")
    write(new, "法务/薪酬.md", "# 薪酬\n\n名单。")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    current = tmp_path / "current"
    current.symlink_to(old)
    argv = [str(current), "--knowledge-id", kb, "--acl-rules", str(tmp_path / "rules.yaml"),
            "--health-port", "0", "--workers", "1",
            "--events", "none", "--rescan", "2"]  # fmt: skip
    watcher = Watching(argv, env(alias), tmp_path / "watch.log")
    watchers.append(watcher)
    until(lambda: "公共/薪酬.md" in stored(es_sync, alias, kb), "first listing", watcher)

    swap = tmp_path / "current.new"
    swap.symlink_to(new)
    os.replace(swap, current)  # (the deploy)
    nightly = subprocess.run(
        [*CLI, "index", str(current), "--knowledge-id", kb, "--acl-rules",
         str(tmp_path / "rules.yaml"), "--prune", "--workers", "1"],
        env=env(alias), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert nightly.returncode == 0, nightly.stdout + nightly.stderr
    assert stored(es_sync, alias, kb).get("法务/薪酬.md") == ("法务",)
    relistings = watcher.said().count("re-listing:")

    def ten_re_listings_later() -> bool:  # (counted, not timed: a loaded machine re-lists later)
        # main: the watcher re-lists v1 and writes 公共/薪酬.md back, answering everyone
        assert "公共/薪酬.md" not in stored(es_sync, alias, kb), watcher.said()[-2000:]
        return watcher.said().count("re-listing:") >= relistings + 10

    until(ten_re_listings_later, "ten of the watcher's re-listings after the nightly run", watcher)
    assert "公共/薪酬.md" not in stored(es_sync, alias, kb), watcher.said()[-2000:]
