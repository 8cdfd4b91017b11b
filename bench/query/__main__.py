"""``python -m bench.query``: the cost benchmark (bench/query/run.py)."""

from bench.query.run import main_cli

main_cli()
