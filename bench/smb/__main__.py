"""``python -m bench.smb``: see bench.smb.listing."""

from __future__ import annotations

import sys

from bench.smb.listing import cli

sys.exit(cli())
