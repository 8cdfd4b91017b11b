"""Citation renumbering (design.md §8; seed §1.3)."""

from __future__ import annotations

from retrieval_svc.citations import resolve

CHUNKS = [{"id": str(i), "content": f"chunk {i}"} for i in range(1, 6)]


def test_first_appearance_order_and_repeats() -> None:
    out = resolve("甲[C:3]。乙[C:1]。丙[C:3]。", CHUNKS)
    assert out["answer"] == "甲[C:1]。乙[C:2]。丙[C:1]。"
    assert [(c["number"], c["id"]) for c in out["citations"]] == [(1, "3"), (2, "1")]
    assert out["citations"][0]["chunk"]["content"] == "chunk 3"
    assert out["uncited_ids"] == ["2", "4", "5"]
    assert out["unknown_ids"] == []


def test_adjacent_markers() -> None:
    out = resolve("见[C:1][C:3]与[C:3][C:2]", CHUNKS)
    assert out["answer"] == "见[C:1][C:2]与[C:2][C:3]"


def test_unknown_ids_are_reported_not_invented() -> None:
    out = resolve("甲[C:9]乙[C:2][C:9]丙[C:0]", CHUNKS)
    assert out["answer"] == "甲乙[C:1]丙"
    assert out["unknown_ids"] == ["9", "0"]
    assert [c["id"] for c in out["citations"]] == ["2"]


def test_variants_llms_write() -> None:
    out = resolve("a[C: 2] b【C:4】 c[C：2] d[C:02]", CHUNKS)
    assert out["answer"] == "a[C:1] b[C:2] c[C:1] d[C:1]"


def test_no_citations() -> None:
    out = resolve("根据现有资料无法确定", CHUNKS)
    assert out["answer"] == "根据现有资料无法确定"
    assert out["citations"] == [] and len(out["uncited_ids"]) == 5


def test_not_markers_are_left_alone() -> None:
    out = resolve("[C:x] [D:1] C:1 [C:]", CHUNKS)
    assert out["answer"] == "[C:x] [D:1] C:1 [C:]"
