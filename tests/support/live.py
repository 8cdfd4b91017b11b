"""A live ``retrieval-svc serve`` child on loopback for tests that need a real process (signals,
workers, a browser, the MCP SDK's HTTP client), against the suite's Elasticsearch."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.harness.service import start_service
from tests.support import ES_URL
from tests.support.fake_provider import free_port


def serve_env(alias: str, keys: Path, **settings: str) -> dict[str, str]:
    """The environment of a service on ``alias`` with the key file ``keys`` and no embedder:
    this process's environment without its ``RSVC_*``, plus ``settings`` (``RSVC_…`` names)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("RSVC_")},
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_MANAGE_INDEX": "false",
        "RSVC_API_KEYS_FILE": str(keys),
        "RSVC_EMBEDDER": "none",
        **settings,
    }


@contextmanager
def live_service(
    env: dict[str, str], folder: Path, *args: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``retrieval-svc serve ARGS`` ready on a free port, logging to ``folder/serve.log``; its
    URL and process. Stopped (terminated, or killed if it will not go) on the way out."""
    port = free_port()
    with (folder / "serve.log").open("w") as log:
        child = start_service("--port", str(port), *args, env=env, port=port, log=log,
                              timeout_s=180)  # fmt: skip
        try:
            yield f"http://127.0.0.1:{port}", child
        finally:
            if child.poll() is None:
                child.terminate()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=10)
