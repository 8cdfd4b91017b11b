"""Fixtures and checks for every test: a clean environment, the hypothesis profile for a
shared machine, and no token minted at collection. Services live in tests/integration/.

tests/unit/ needs no service and runs in seconds (`scripts/test --unit`); tests/integration/
uses the real Elasticsearch the suite started, and the servers its conftest starts.
"""

from __future__ import annotations

import os
from pathlib import Path

import hypothesis
import pytest

from tests.support import time_bound_tokens

# No per-example time limit: a shared CI machine may be slow at any moment (issue #18).
hypothesis.settings.register_profile(
    "shared-machine",
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile("shared-machine")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test parameter that carries a token minted at collection time.

    Collection can precede the test by minutes on a busy machine, so such a token may expire
    before it is used (issue #18). Declare ``tests.support.Token`` instead: it mints on use.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        for name, value in callspec.params.items():
            if time_bound_tokens(value):
                raise pytest.UsageError(
                    f"{item.nodeid}: parameter {name!r} holds a JWT minted at collection; "
                    "declare it as tests.support.Token so it is minted when the test runs"
                )


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RSVC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(Path(__file__).parent)  # no stray .env is read


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
