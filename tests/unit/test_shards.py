"""Shards that partition a source exactly (issue #49 §1): every object in exactly one shard,
the same on every run, whatever the order; shard values checked before anything is done."""

from __future__ import annotations

import random

import pytest

from indexer.documents import document_id
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
