"""At concurrency 1 the benchmark's scenarios take turns query by query, the order rotated,
so a slow stretch of the machine falls on all of them alike (issue #38's p50 comparison)."""

from __future__ import annotations

import asyncio

from bench.harness.measure import Run, add, interleaved


def test_scenarios_take_turns_per_item_in_a_rotating_order() -> None:
    calls: list[tuple[str, int]] = []

    def scenario(name: str):  # type: ignore[no-untyped-def]
        async def call(item: int) -> tuple[str, int]:
            calls.append((name, item))
            if name == "b" and item == 2:
                raise RuntimeError("refused")
            return name, item * 10

        return call

    runs = asyncio.run(interleaved({n: scenario(n) for n in "abc"}, [0, 1, 2, 3]))

    assert calls == [
        ("a", 0), ("b", 0), ("c", 0),
        ("b", 1), ("c", 1), ("a", 1),
        ("c", 2), ("a", 2), ("b", 2),
        ("a", 3), ("b", 3), ("c", 3),
    ]  # fmt: skip
    assert runs["a"].outputs == [("a", 0), ("a", 10), ("a", 20), ("a", 30)]
    assert runs["b"].outputs[2] is None and runs["b"].errors == 1
    assert runs["b"].failures == ["RuntimeError: refused"]
    assert [len(r.latencies_ms) for r in runs.values()] == [4, 3, 4]
    assert all(r.wall_s > 0 and r.summary()["qps"] > 0 for r in runs.values())


def test_runs_over_blocks_add_up_to_one_over_all_items() -> None:
    total = Run(outputs=[None] * 5)
    add(total, Run(latencies_ms=[1.0, 2.0], wall_s=0.5, outputs=["a", "b"]), 0)
    add(total, Run(latencies_ms=[3.0], wall_s=0.25, outputs=["c", None, "e"], errors=1,
                   failures=["RuntimeError: x"]), 2)  # fmt: skip

    assert total.outputs == ["a", "b", "c", None, "e"]
    assert total.latencies_ms == [1.0, 2.0, 3.0] and total.wall_s == 0.75
    assert total.errors == 1 and total.failures == ["RuntimeError: x"]
    assert total.summary()["qps"] == 4.0
