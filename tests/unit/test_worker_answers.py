"""A worker's answer is read in one place (``indexer.workers.pool.settle``): whatever wraps
it, a document gets its chunks or a reason, never an exception object as its chunks."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.budget import Budget
from indexer.workers.pool import Answer, Failed, OutOfMemory, Parsed, settle

BUDGET = Budget(memory_mb=64)
CHUNKS: list[dict[str, Any]] = [{"chunk_id": "c1", "content": "巡检"}]


@pytest.mark.parametrize(
    ("answer", "result", "reusable"),
    [
        pytest.param(Answer(Parsed(CHUNKS)), CHUNKS, True, id="chunks"),
        pytest.param(Answer(Parsed(CHUNKS), retiring=True), CHUNKS, False, id="chunks-retiring"),
        pytest.param(Answer(Failed("坏了")), "坏了", True, id="failed"),
        pytest.param(Answer(Failed("坏了"), retiring=True), "坏了", False, id="failed-retiring"),
        pytest.param(Answer(OutOfMemory()), str(BUDGET.out_of_memory()), False, id="oom"),
        pytest.param(
            Answer(OutOfMemory(), retiring=True), str(BUDGET.out_of_memory()), False,
            id="oom-retiring",
        ),
    ],
)  # fmt: skip
def test_every_answer_is_the_document_s_chunks_or_a_reason(
    answer: Answer, result: object, reusable: bool
) -> None:
    assert settle(answer, BUDGET) == (result, reusable)


@pytest.mark.parametrize("stray", [MemoryError(), ("retiring", MemoryError()), None, [1, 2]])
def test_anything_else_fails_the_document_and_the_worker(stray: object) -> None:
    result, reusable = settle(stray, BUDGET)
    assert isinstance(result, str) and "not a document" in result
    assert not reusable
