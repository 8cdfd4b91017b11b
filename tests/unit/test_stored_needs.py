"""What a run or the watcher does with a stored document (``Stored.needs``), as a truth table:
the same bytes under the same permission sources are skipped — unless its chunks are held
(the watcher made them answer no one), which is never left so."""

from __future__ import annotations

import pytest

from indexer.store import Stored


def stored(*, held: bool = False, counts: tuple[int, int] | None = (2, 2)) -> Stored:
    return Stored(frozenset({"e1"}), frozenset({"v1"}), chunks=2, counts=counts, held=held)


@pytest.mark.parametrize(
    ("doc", "etag", "version", "force", "need"),
    [
        pytest.param(stored(), "e1", "v1", False, "skip", id="same"),
        pytest.param(stored(), "e1", "v2", False, "retag", id="other-roles"),
        pytest.param(stored(), "e2", "v1", False, "write", id="other-bytes"),
        pytest.param(stored(), "e1", "v1", True, "write", id="forced"),
        pytest.param(stored(counts=(3, 3)), "e1", "v1", False, "write", id="cut-short"),
        pytest.param(stored(held=True), "e1", "v1", False, "retag", id="held-same"),
        pytest.param(stored(held=True), "e2", "v1", False, "write", id="held-other-bytes"),
    ],
)  # fmt: skip
def test_what_a_stored_document_needs(
    doc: Stored, etag: str, version: str, force: bool, need: str
) -> None:
    assert doc.needs(etag, version, force) == need
