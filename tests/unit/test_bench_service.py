"""The harnesses' service starter refuses a port something already answers on: that other
process's /readyz would pass for the service it starts (two benchmarks at once did this)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from bench.harness.service import start_service


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        marker = tmp_path / "started"
        with (tmp_path / "log").open("w") as log, pytest.raises(RuntimeError, match="in use"):
            start_service(
                command=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                env={},
                port=port,
                log=log,
                timeout_s=5,
            )
        assert not marker.exists()
