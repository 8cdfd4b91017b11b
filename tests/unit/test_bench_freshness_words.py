"""A benchmark that reads a command's lines hears them in either language: the command speaks
its terminal's. ``python -m bench.freshness`` waits for the watcher's first re-listing in its
log (in a Chinese terminal it waited for the English word until its deadline); the directory
benchmark's delta sync waits for sync-ldap's "synced" line (it read past the Chinese one to the
command's end and then failed), and the window benchmark's for "synced" or "unchanged" (it
waited for ever: ``sync-ldap --every`` does not end)."""

from __future__ import annotations

import pytest

from bench.freshness.run import _relisted
from bench.harness.heard import starts_as
from retrieval_svc.words import say


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_watcher_s_re_listing_is_heard_in_either_language(lang: str) -> None:
    started = "Elasticsearch at http://127.0.0.1:9200: …\n"
    line = f"14:58:59 {say('what_relisting', lang)}：50 …\n"
    assert not _relisted(started)
    assert _relisted(started + line)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sync_ldap_s_synced_line_is_heard_in_either_language(lang: str) -> None:
    line = say("synced", lang, added=3, removed=1, grants=40, read="7 users from ldap://x")
    assert starts_as(line + "\n", "synced")
    assert not starts_as(say("would_add", lang, added=3, removed=1, read="x"), "synced")
    unchanged = say("unchanged_directory", lang, stamp="contextCSN")
    assert starts_as(unchanged, "synced", "unchanged_directory")  # (directory_window's wait)
