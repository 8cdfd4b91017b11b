"""The suite never touches the Elasticsearch another team runs on 127.0.0.1:9200 (the product's
default RSVC_ES_URL): a connection there is refused before it is made, a product command started
without RSVC_ES_URL is pointed at a closed port, and the suite's cluster, unnamed, is no 9200."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import others_cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_connection_to_the_default_port_is_refused_and_named(host: str) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        with pytest.raises(ConnectionRefusedError, match="not its Elasticsearch"):
            sock.connect((host, 9200))
    touched, others_cluster.touched[:] = list(others_cluster.touched), []  # (seen: not a failure)
    assert touched == [f"{host}:9200"]


def test_a_product_command_without_a_cluster_named_gets_a_closed_port() -> None:
    show = "import os; print(os.environ.get('RSVC_ES_URL'))"
    env = {"PATH": os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-c", show, "retrieval-indexer"], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == others_cluster.CLOSED_ES_URL
    named = {**env, "RSVC_ES_URL": "http://127.0.0.1:19999"}
    kept = subprocess.run([sys.executable, "-c", show, "indexer"], env=named,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert kept.stdout.strip() == "http://127.0.0.1:19999"


def test_the_suites_cluster_unnamed_is_a_closed_port_not_9200() -> None:
    show = "from tests.support import ES_URL; print(ES_URL)"
    env = {k: v for k, v in os.environ.items() if k != "RSVC_ES_URL"}
    done = subprocess.run([sys.executable, "-c", show], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == others_cluster.CLOSED_ES_URL and "9200" not in done.stdout
