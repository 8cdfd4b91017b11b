"""``python -m bench.formats``: what each format yields and costs (bench/formats/run.py)."""

from bench.formats.run import cli

raise SystemExit(cli())
