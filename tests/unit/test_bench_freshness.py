"""The freshness benchmark's pure parts: how long those who keep access found nothing."""

from __future__ import annotations

from bench.freshness.changes import Change
from bench.freshness.report import table


def test_the_time_a_keeper_found_nothing_adds_up_over_each_dark_stretch() -> None:
    change = Change("rules", 100.0, bool, kept=bool)
    for sees, now in [(True, 100.5), (False, 101.0), (False, 102.0), (True, 103.5),
                      (False, 104.0), (True, 104.25), (True, 110.0)]:  # fmt: skip
        change.keeping(sees, now)
    assert change.dark_s == 2.75
    assert change.dark_from is None


def test_the_table_shows_the_keepers_figures_and_what_stayed_dark() -> None:
    row = {"n": 3, "p50": 1.0, "p95": 2.0, "max": 2.0}
    kept = {"rules": {"n": 3, "p50": 4.5, "p95": 9.25, "max": 9.25}}
    run = {"by_kind": {"rules": row}, "narrowing": row, "widening": None, "missed": 0,
           "kept": kept, "still_dark": 1}  # fmt: skip
    result = {"machine": "m", "settings": {"objects": 10, "changes": 3, "rate": 1.0},
              "scenarios": {"folder events": run}, "targets": []}  # fmt: skip
    shown = table(result)
    assert "| folder events | rules | 3 | 4.5 | 9.25 | 9.25 |" in shown
    assert "| folder events | still dark at the end | 1 | | | |" in shown
