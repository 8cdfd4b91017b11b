"""Heading- and paragraph-aware chunking (pure)."""

from __future__ import annotations

import pytest

from indexer.chunking import ChunkOptions, chunk_text


def test_headings_start_chunks_and_lead_their_text() -> None:
    text = "# 标题\n\n## 第一节\n\n第一段。\n\n## 第二节\n\n第二段。\n"
    assert chunk_text(text) == ["标题\n第一节\n第一段。", "第二节\n第二段。"]


def test_paragraphs_are_packed_up_to_the_limit() -> None:
    para = "巡" * 40
    chunks = chunk_text("\n\n".join([para] * 5), ChunkOptions(max_chars=100))
    assert all(len(c) <= 100 for c in chunks)
    assert "".join(chunks).replace("\n", "") == para * 5


def test_long_chinese_paragraph_splits_at_sentence_ends() -> None:
    sentence = "巡检人员应按计划完成巡检。"
    chunks = chunk_text(sentence * 20, ChunkOptions(max_chars=60))
    assert len(chunks) > 1
    assert all(c.endswith("。") for c in chunks)
    assert all(len(c) <= 60 for c in chunks)


def test_english_sentences_split_too() -> None:
    chunks = chunk_text("This is a sentence. " * 30, ChunkOptions(max_chars=80))
    assert all(len(c) <= 80 for c in chunks)
    assert all(c.endswith(".") for c in chunks)


def test_unbroken_text_is_hard_split() -> None:
    chunks = chunk_text("x" * 250, ChunkOptions(max_chars=100))
    assert [len(c) for c in chunks] == [100, 100, 50]


def test_overlap_repeats_the_previous_tail() -> None:
    text = "\n\n".join(["甲" * 60, "乙" * 60, "丙" * 60])
    chunks = chunk_text(text, ChunkOptions(max_chars=70, overlap_chars=10))
    assert chunks[1].startswith("甲" * 10)
    assert chunks[2].startswith("乙" * 10)


def test_empty_text_gives_no_chunks() -> None:
    assert chunk_text("\n\n  \n") == []


@pytest.mark.parametrize(("size", "overlap"), [(10, 0), (100, 60), (100, -1)])
def test_bad_options(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        ChunkOptions(max_chars=size, overlap_chars=overlap)


def test_one_long_line_chunks_in_time_linear_in_its_length() -> None:
    # Issue #37 §2: a 94 MB text file on one line never finished; slicing the rest of a
    # sentence off at every cut was quadratic. Ten times the text takes about ten times the
    # time (a ratio within one run, never a wall-clock bound).
    import time

    def seconds(chars: int) -> float:
        text = ("巡检记录" * (chars // 4 + 1))[:chars]  # no sentence end anywhere
        started = time.perf_counter()
        chunks = chunk_text(text, ChunkOptions(max_chars=600))
        took = time.perf_counter() - started
        assert "".join(chunks) == text and max(map(len, chunks)) == 600
        return took

    seconds(100_000)  # warm
    small, large = (
        min(seconds(500_000) for _ in range(3)),
        min(seconds(5_000_000) for _ in range(2)),
    )
    assert large / small < 40, (small, large)  # linear: ~10; the old code: ~100 and rising


def test_hard_cuts_are_what_they_were() -> None:
    from indexer.chunking import _split_long

    for length in (599, 600, 601, 1200, 1201, 1800, 2999):
        text = "字" * length + "。短句。"
        pieces = _split_long(text, 600)
        assert "".join(pieces) == text and all(len(p) <= 600 for p in pieces), length
        assert [len(p) for p in pieces[: (length - 1) // 600]] == [600] * ((length - 1) // 600)
