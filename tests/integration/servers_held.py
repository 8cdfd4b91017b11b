"""Not a test of its own (its name keeps it out of the suite): the inner run of
tests/integration/test_clean_exit.py. It starts what a suite starts — PostgreSQL, slapd, a
child process — writes where they are to ``RSVC_HELD_MARKER`` and waits to be interrupted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.support import SERVERS_DIR

MARKER = os.environ.get("RSVC_HELD_MARKER", "")  # (read at import: the test's env is cleaned)


def test_holds_servers_until_interrupted(postgres_url: str, ldap_server: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(MARKER + ".tmp", "w", encoding="utf-8") as out:
        json.dump(
            {
                "servers_dir": SERVERS_DIR,
                "postgres": postgres_url,
                "ldap": ldap_server,
                "child": child.pid,
                "pytest": os.getpid(),
            },
            out,
        )
    os.replace(MARKER + ".tmp", MARKER)
    time.sleep(3600)  # (until the run is interrupted)
