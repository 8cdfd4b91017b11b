"""Who holds a lease, told apart (``indexer.holder``): a process of this host's other PID
namespace — a second container sharing the host's name — is never judged gone from here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

from indexer.holder import Process

HERE = Process.here()


def record(**changes: object) -> dict[str, object]:
    return {**HERE.as_json(), **changes}


def test_a_dead_predecessor_in_this_namespace_is_gone() -> None:
    assert HERE.namespace.startswith("pid:[")
    assert HERE.gone(record(pid=HERE.pid, started=(HERE.started or 0) + 1))
    assert not HERE.gone(record())  # (this very process)


def test_a_holder_of_another_pid_namespace_is_never_judged_gone() -> None:
    other = record(pid=HERE.pid, started=(HERE.started or 0) + 1, pid_namespace="pid:[1]")
    assert not HERE.gone(other) and HERE.elsewhere(other)
    before = {k: v for k, v in record(pid=HERE.pid, started=0).items() if k != "pid_namespace"}
    assert not HERE.gone(before)  # (recorded before namespaces were: unknown, waited out)
    assert HERE.gone(replace(HERE, boot="another boot").as_json())  # (the host restarted)


def test_a_live_watcher_in_a_real_second_pid_namespace_is_not_taken_from() -> None:
    # unshare(1) as the suite runs it (root): the other process is pid 1 of its namespace,
    # alive, while this host's pid 1 is another process with another start time.
    code = (
        "import json, sys; from indexer.holder import Process; "
        "print(json.dumps(Process.here().as_json()), flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.getcwd(),
    ) as other:  # fmt: skip
        assert other.stdout is not None and other.stdin is not None
        try:
            held = json.loads(other.stdout.readline())
            assert held["host"] == HERE.host and held["pid"] == 1
            assert not HERE.gone(held), "a live holder in another namespace read as gone"
        finally:
            other.stdin.close()
            other.wait(timeout=30)
