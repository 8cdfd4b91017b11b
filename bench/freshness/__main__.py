"""``python -m bench.freshness``: see the package's docstring."""

from __future__ import annotations

import sys

from bench.freshness.run import cli

sys.exit(cli())
