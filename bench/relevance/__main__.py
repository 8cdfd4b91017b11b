"""``python -m bench.relevance``: relevance on CMRC 2018 (bench/relevance/run.py)."""

from bench.relevance.run import cli

raise SystemExit(cli())
