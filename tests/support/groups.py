"""Which pytest process runs which tests when scripts/test runs the suite in several
(pytest-xdist, ``-n 2 --dist loadscope``, ``RSVC_TEST_WORKERS``).

Decided for every test file alike, so a new file needs nothing: a module's tests stay together
in one process (its module fixtures start once, its tests keep their order), and every module
that uses a server too heavy to start in each process (``SHARED_ONCE``: a whole Samba AD DC)
joins that server's group, run by one process. A module may also name a group of its own with
``pytest.mark.xdist_group("name")``: the modules naming one group run in one process.

xdist's own ``--dist loadgroup`` cannot be used: it renames each test's id, which pytest 9 no
longer lets a plugin do. So each process writes the group of each test it collected to a file
in a folder the main process names, and the main process's scheduler reads it once every
process has collected (they collect the same tests: xdist checks) before handing out modules.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

SHARED_ONCE = ("samba_ad",)
FOLDER_KEY = "rsvc_groups_folder"  # (in xdist's workerinput: what the main process passes on)


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each test's group: its module's, or the group its module shares with others."""
    by_module: defaultdict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_module[item.nodeid.split("::", 1)[0]].append(item)
    found: dict[str, str] = {}
    for module, tests in by_module.items():
        named = {str(m.args[0]) for t in tests for m in t.iter_markers("xdist_group") if m.args}
        uses = {name for test in tests for name in getattr(test, "fixturenames", ())}
        shared = [f"uses {name}" for name in SHARED_ONCE if name in uses]
        group = min(named) if named else (shared[0] if shared else module)
        found.update((test.nodeid, group) for test in tests)
    return found


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker process: its tests' groups, for the main process's scheduler."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not workerinput or FOLDER_KEY not in workerinput:
        return
    path = Path(workerinput[FOLDER_KEY]) / f"{workerinput['workerid']}.json"
    path.write_text(json.dumps(groups(items)), encoding="utf-8")


FOLDER = pytest.StashKey[Path]()


def start(config: pytest.Config) -> None:
    """In the main process of a run in several: the folder the workers write their groups to."""
    if getattr(config, "workerinput", None) is None and config.getoption("numprocesses", None):
        config.stash[FOLDER] = Path(tempfile.mkdtemp(prefix="rsvc-test-groups-"))


def end(config: pytest.Config) -> None:
    folder = config.stash.get(FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pass_on(node: Any) -> None:
    """``pytest_configure_node``: tell a worker where to write its tests' groups."""
    folder = node.config.stash.get(FOLDER, None)
    if folder is not None:
        node.workerinput[FOLDER_KEY] = str(folder)


def scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest_xdist_make_scheduler``: ours for ``--dist loadscope``, xdist's otherwise."""
    folder = config.stash.get(FOLDER, None)
    if folder is None or config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling  # (only here: a venv without it still runs)

    class GroupScheduling(LoadScopeScheduling):
        """xdist's module-by-module scheduling, with the groups the workers wrote as its units."""

        def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
            super().__init__(config, log)
            self._folder = folder
            self._groups: dict[str, str] = {}

        def schedule(self) -> None:
            if self.collection is None and not self._groups:
                for written in sorted(self._folder.glob("*.json")):
                    self._groups.update(json.loads(written.read_text(encoding="utf-8")))
                    break  # (every worker collected the same tests)
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self._groups.get(nodeid) or nodeid.split("::", 1)[0]

    return GroupScheduling(config, log, folder)
