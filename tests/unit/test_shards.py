"""Shards that partition a source exactly (issue #49 §1): every object in exactly one shard,
the same on every run, whatever the order; shard values checked before anything is done."""

from __future__ import annotations

import random
from typing import Any

import pytest

from indexer.documents import document_id
from indexer.passing_over import SCRATCH_REASON
from indexer.shards import Shard, from_environment


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "x", "1/", "0/100001", " / "])
def test_a_shard_that_cannot_be_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        Shard.parse(text)


def test_every_document_is_in_exactly_one_shard_whatever_the_order() -> None:
    ids = [document_id("kb", f"s3://bucket/key-{i}.md", "acme") for i in range(5000)]
    for count in (1, 2, 3, 7):
        shards = [Shard(i, count) for i in range(count)]
        owners = {d: [s.index for s in shards if s.holds(d)] for d in ids}
        assert all(len(o) == 1 for o in owners.values())
        shuffled = ids[:]
        random.Random(count).shuffle(shuffled)
        assert {d: [s.index for s in shards if s.holds(d)] for d in shuffled} == owners
        sizes = [sum(o == [i] for o in owners.values()) for i in range(count)]
        assert min(sizes) > 0.8 * len(ids) / count  # (roughly even)


def test_an_indexed_job_gives_the_shard_from_its_environment() -> None:
    assert from_environment({}) is None
    assert from_environment({"JOB_COMPLETION_INDEX": "2", "RSVC_INDEXER_SHARDS": "4"}) == Shard(
        2, 4
    )
    with pytest.raises(ValueError, match="go together"):
        from_environment({"JOB_COMPLETION_INDEX": "2"})
    with pytest.raises(ValueError, match="the index must be 0 to 3"):
        from_environment({"JOB_COMPLETION_INDEX": "4", "RSVC_INDEXER_SHARDS": "4"})


def test_a_partial_run_over_shards_is_shown_as_such() -> None:
    from retrieval_svc.search.runs import shown

    def record(shard: str, seen: int, at: str) -> dict[str, Any]:
        return {
            "knowledge_id": "kb",
            "shard": shard,
            "finished_at": at,
            "documents_seen": seen,
            "failures": [{"document": f"d{shard}", "reason": "x"}],
            "passed_over": [{"reason": SCRATCH_REASON, "count": 1, "examples": [shard]}],
        }

    old = {"knowledge_id": "kb", "finished_at": "2026-01-01T00:00:00", "documents_seen": 9}
    combined = shown(
        [old, record("0/3", 5, "2026-02-01T00:00:01"), record("2/3", 7, "2026-02-01T00:00:03")]
    )
    assert combined["documents_seen"] == 12  # the newest layout's records, not the older run
    assert combined["shards"]["missing"] == [1] and combined["shards"]["reported"] == 2
    assert combined["finished_at"] == "2026-02-01T00:00:03"
    assert combined["passed_over"] == [
        {"reason": SCRATCH_REASON, "code": "scratch", "count": 2, "examples": ["0/3", "2/3"]}
    ]
    assert len(combined["failures"]) == 2
    # An unsharded run newer than the shards' records is what is shown.
    newer = {**old, "finished_at": "2026-03-01T00:00:00"}
    assert shown([newer, record("0/3", 5, "2026-02-01T00:00:01")]) == newer
