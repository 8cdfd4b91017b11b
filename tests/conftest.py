"""Fixtures and checks for every test: a clean environment, the hypothesis profile for a
shared machine, and no token minted at collection. Services live in tests/integration/.

tests/unit/ needs no service and runs in seconds (`scripts/test --unit`); tests/integration/
uses the real Elasticsearch the suite started, and the servers its conftest starts.
"""

from __future__ import annotations

import importlib.util
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from tests.support import ES_URL, groups, others_cluster, time_bound_tokens

# No per-example time limit: a shared CI machine may be slow at any moment (issue #18).
hypothesis.settings.register_profile(
    "shared-machine",
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile("shared-machine")


def _refuse_tokens_minted_at_collection(items: list[pytest.Item]) -> None:
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


# Which tests run in which process when scripts/test runs the suite in several: every module in
# one process, the modules sharing a heavy server (the Samba DC) in one (tests/support/groups.py).
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _refuse_tokens_minted_at_collection(items)
    groups.write_groups(config, items)


def pytest_configure(config: pytest.Config) -> None:
    groups.start(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    groups.end(config)


if importlib.util.find_spec("xdist"):  # (a virtualenv made before it was a dev dependency)

    def pytest_configure_node(node: Any) -> None:
        groups.pass_on(node)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        return groups.scheduler(config, log)


# No test contacts 127.0.0.1:9200 unless RSVC_ES_URL names it (another team's cluster is there).
others_cluster.refuse_default_port(ES_URL)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("RSVC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(Path(__file__).parent)  # no stray .env is read
    others_cluster.touched.clear()
    yield
    touched, others_cluster.touched[:] = list(others_cluster.touched), []
    assert not touched, f"this test connected to {touched}: not the suite's Elasticsearch"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


# Where the suite's time goes (issue #59 §3), printed at its end: setup, call and teardown of
# each test summed by module (a session fixture's start counts where it is first used).
_SECONDS_BY_MODULE: defaultdict[str, float] = defaultdict(float)
LONGEST_SHOWN = 25


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _SECONDS_BY_MODULE[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SECONDS_BY_MODULE:
        return
    ranked = sorted(_SECONDS_BY_MODULE.items(), key=lambda item: item[1], reverse=True)
    total = sum(_SECONDS_BY_MODULE.values())
    shown = min(LONGEST_SHOWN, len(ranked))
    terminalreporter.write_sep(
        "-", f"time by test module: the {shown} longest of {len(ranked)}, {total:.0f} s in all"
    )
    for module, seconds in ranked[:shown]:
        terminalreporter.write_line(f"{seconds:7.1f} s  {module}")
