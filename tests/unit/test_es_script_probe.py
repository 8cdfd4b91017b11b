"""``scripts/es.sh`` finds out whether a port is taken without connecting to what holds it: a
cluster another team runs on 9200 sees no connection from this checkout's scripts."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listens(port: int, tmp_path: Path) -> bool:
    """``listens PORT`` of scripts/es.sh (sourced, as scripts/es-cluster.sh does)."""
    done = subprocess.run(
        ["bash", "-c", f'source "{ROOT}/scripts/es.sh"; listens {port}'],
        env={"PATH": "/usr/bin:/bin", "RSVC_ES_CACHE": str(tmp_path / "cache")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def test_a_taken_port_is_found_without_a_connection_to_it(tmp_path: Path) -> None:
    with socket.socket() as theirs:
        theirs.bind(("127.0.0.1", 0))
        theirs.listen(8)
        port = theirs.getsockname()[1]
        assert listens(port, tmp_path)
        theirs.setblocking(False)
        try:
            connection, _ = theirs.accept()
        except BlockingIOError:
            connection = None
        assert connection is None, "es.sh connected to the server it only had to leave alone"
    assert not listens(port, tmp_path)  # (closed: free again)
