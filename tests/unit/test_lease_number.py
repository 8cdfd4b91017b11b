"""A lease holding's number (``indexer.lease.next_number``): one above the last, never below
the clock's floor, and a recorded number that cannot be believed is passed over."""

from __future__ import annotations

import pytest

from indexer.lease import EPOCH, next_number

NOW = EPOCH + 200_000_000.5  # (a moment in 2026)
FLOOR = 200_000_000


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        pytest.param(None, FLOOR, id="none-yet"),
        pytest.param(FLOOR + 41, FLOOR + 42, id="one-above-the-last"),
        pytest.param(7, FLOOR, id="record-lost-and-begun-again"),
        pytest.param(FLOOR + 10**9, FLOOR, id="forged-far-ahead"),
        pytest.param(1e300, FLOOR, id="not-an-integer"),
        pytest.param(True, FLOOR, id="a-boolean"),
        pytest.param("9" * 40, FLOOR, id="text"),
        pytest.param(-5, FLOOR, id="negative"),
    ],
)
def test_a_holding_s_number(stored: object, expected: int) -> None:
    number = next_number(stored, NOW)
    assert number == expected
    assert (number << 32) | (1 << 32) - 1 < 1 << 63  # (a version Elasticsearch takes)
