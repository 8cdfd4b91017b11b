"""The suite never touches an Elasticsearch it did not start: on this shared machine another
team's cluster answers on 127.0.0.1:9200, the product's default ``RSVC_ES_URL``.

``refuse_default_port`` (installed by tests/conftest.py) is an audit hook: a connection this
process opens to a loopback address's port 9200 (unless ``RSVC_ES_URL`` named that port) is
refused before it is made, and the test that opened it fails. A product command a test starts
as a child process with an environment that names no ``RSVC_ES_URL`` is given
``CLOSED_ES_URL`` (a port nothing listens on), not the product's default.
"""

from __future__ import annotations

import errno
import ipaddress
import sys
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PORT = 9200
# Where a command the suite starts without naming a cluster looks: the discard port, which
# nothing on this machine serves (a connection there is refused at once).
CLOSED_ES_URL = "http://127.0.0.1:9"
# Words in a child's command line that mark one of this checkout's commands.
PRODUCT = ("indexer", "retrieval_svc", "retrieval-svc", "retrieval-indexer", "bench.")

touched: list[str] = []  # what was refused, read (and emptied) after each test


def _loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost.", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _product(args: Any) -> bool:
    words = [args] if isinstance(args, (str, bytes)) else list(args or ())
    text = " ".join(w.decode() if isinstance(w, bytes) else str(w) for w in words)
    return "es.sh" not in text and "es-cluster.sh" not in text and any(p in text for p in PRODUCT)


def refuse_default_port(suite_url: str) -> None:
    """Install the audit hook (once per process) for a suite whose cluster is ``suite_url``."""
    if urlsplit(suite_url).port == DEFAULT_PORT:
        return  # (RSVC_ES_URL names 9200 itself: the operator's choice)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple) and len(address) >= 2:
                if address[1] == DEFAULT_PORT and _loopback(address[0]):
                    touched.append(f"{address[0]}:{address[1]}")
                    raise ConnectionRefusedError(
                        errno.ECONNREFUSED, "refused by the suite: not its Elasticsearch"
                    )
        elif event == "subprocess.Popen":
            _executable, argv, _cwd, env = args
            if isinstance(env, dict) and "RSVC_ES_URL" not in env and _product(argv):
                env["RSVC_ES_URL"] = CLOSED_ES_URL

    sys.addaudithook(hook)
