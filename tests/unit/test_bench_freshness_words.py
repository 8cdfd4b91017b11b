"""``python -m bench.freshness`` waits for the watcher's first re-listing by reading its log,
which speaks the terminal's language: in a Chinese terminal it must know the Chinese line (it
waited for the English word and gave up after its deadline)."""

from __future__ import annotations

import pytest

from bench.freshness.run import _relisted
from retrieval_svc.words import say


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_watcher_s_re_listing_is_heard_in_either_language(lang: str) -> None:
    started = "Elasticsearch at http://127.0.0.1:9200: …\n"
    line = f"14:58:59 {say('what_relisting', lang)}：50 …\n"
    assert not _relisted(started)
    assert _relisted(started + line)
