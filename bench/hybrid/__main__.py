"""``python -m bench.hybrid``: BM25 and hybrid with vectors (bench/hybrid/run.py)."""

from bench.hybrid.run import run

raise SystemExit(run())
