"""Metadata is untrusted input (issue #37 §1): a YAML alias bomb, oversized front matter or
sidecars, and values past the API's caps are failed documents with their reason, at once."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from indexer.documents import DocumentError, SourceObject, build_chunks, split_front_matter
from indexer.metadata_limits import MAX_DEPTH, MAX_FRONT_MATTER_BYTES, MAX_STRING_CHARS
from indexer.sources import LocalSource


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "---\n" + "\n".join(lines) + "\n---\n正文\n"


def test_a_yaml_alias_bomb_is_refused_before_it_grows() -> None:
    text = billion_laughs()
    assert len(text.encode()) < 700  # the 554-byte file, near enough
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DocumentError, match=r"YAML alias \*a0"):
        split_front_matter(text)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 50_000, grown_kb  # (it grew to 23 GB)


def test_anchors_without_aliases_still_read() -> None:
    meta, body = split_front_matter("---\ncategory: &c 巡检\ntags: [a, b]\n---\n正文\n")
    assert meta == {"category": "巡检", "tags": ["a", "b"]} and body == "正文\n"


def test_front_matter_over_its_bytes_is_refused() -> None:
    filler = "".join(f"k{i}: {'x' * 60}\n" for i in range(MAX_FRONT_MATTER_BYTES // 60 + 10))
    with pytest.raises(DocumentError, match="front matter is over the limit"):
        split_front_matter("---\n" + filler + "---\n正文\n")


def doc(**meta: object) -> SourceObject:
    return SourceObject(uri="file:///x.md", identity="x", name="x.md", text="正文 内容",
                        front_matter={}, metadata_layers=(meta,))  # fmt: skip


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        pytest.param({"access_roles": [f"r{i}" for i in range(1025)]}, "1,025 roles", id="roles"),
        pytest.param({"note": "长" * (MAX_STRING_CHARS + 1)}, "characters, over", id="string"),
        pytest.param({"big": list(range(20_000))}, "20,000 items, over 10,000", id="values"),
    ],
)
def test_values_past_the_caps_fail_the_document(meta: dict[str, object], reason: str) -> None:
    with pytest.raises(DocumentError, match=reason):
        build_chunks(doc(**meta), knowledge_id="kb", dataset_name="kb")


def test_nesting_past_the_depth_fails_the_document() -> None:
    deep: object = "leaf"
    for _ in range(MAX_DEPTH + 2):
        deep = {"k": deep}
    with pytest.raises(DocumentError, match=f"deeper than {MAX_DEPTH}"):
        build_chunks(doc(deep=deep), knowledge_id="kb", dataset_name="kb")


def test_a_shared_list_counts_each_time_it_is_met() -> None:
    shared = list(range(100))
    nested = [shared] * 200  # 20,000 values when written out, 300 objects in memory
    with pytest.raises(DocumentError, match="more than 10,000 values"):
        build_chunks(doc(nested=nested), knowledge_id="kb", dataset_name="kb")


def test_ordinary_metadata_passes() -> None:
    chunks = build_chunks(
        doc(access_roles=["运维工程师"], category="巡检", tags=["a", "b"], n=3),
        knowledge_id="kb",
        dataset_name="kb",
    )
    assert chunks[0]["access_roles"] == ["运维工程师"]


def test_an_oversized_sidecar_fails_its_document(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("正文", encoding="utf-8")
    (tmp_path / "a.md.meta.json").write_text('{"x": "' + "y" * 1_100_000 + '"}')
    source = LocalSource(tmp_path)
    (ref,) = list(source.list())
    with pytest.raises(DocumentError, match=r"sidecar a\.md\.meta\.json is 1,048,577 bytes"):
        source.sidecar(ref)


@pytest.mark.parametrize("role", ["user:alice", "anyone"])
def test_a_role_no_principal_can_hold_fails_the_document(role: str) -> None:
    # Issue #36 §6: one chunk stored with access_roles ["user:alice"] broke Search as.
    with pytest.raises(DocumentError, match="per-user sharing is not supported"):
        build_chunks(doc(access_roles=["物业经理", role]), knowledge_id="kb", dataset_name="kb")


def test_the_run_s_memory_bound_sets_workers_and_memory_per_document() -> None:
    from indexer.budget import RUN_BASE_MB, WORKER_BASE_MB, split_memory

    for cores in (1, 2, 8, 64):
        workers, per_document = split_memory(1024, cores)
        assert 1 <= workers <= min(cores, 8) and per_document >= 128, (cores, workers)
        assert RUN_BASE_MB + workers * (WORKER_BASE_MB + per_document) <= 1024
    assert split_memory(1024, 2) == (2, 212)
    assert split_memory(1024, 8, workers=4) == (4, 56)  # asked for: memory follows
    assert split_memory(4096, 8, doc_mb=512) == (6, 512)


def test_the_objects_in_flight_stay_under_the_byte_limit() -> None:
    import asyncio

    from indexer.workers import InFlight

    async def main() -> tuple[list[tuple[int, int]], list[int]]:
        gate = InFlight(100)
        held: list[tuple[int, int]] = []  # (bytes held, the size of who looked)
        seen: list[int] = []

        async def one(size: int) -> None:
            async with gate.hold(size):
                held.append((gate.held, size))
                seen.append(size)
                await asyncio.sleep(0.01)
                held.append((gate.held, size))

        await asyncio.gather(*(one(s) for s in [40] * 10 + [250, 30]))
        return held, seen

    held, seen = asyncio.run(main())
    assert sorted(seen) == sorted([40] * 10 + [250, 30])  # every one went through
    # Never more than the limit, except one object over it, alone.
    assert all(total <= 100 or total == size == 250 for total, size in held), held
    assert max(total for total, _ in held if total <= 100) == 80  # (two of 40 at once)
