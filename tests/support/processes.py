"""A child process's peak resident memory, with every process it starts (``bench.harness.tree``,
shared with the benchmarks)."""

from bench.harness.tree import Measured, run_measured, tree_rss

__all__ = ["Measured", "run_measured", "tree_rss"]
