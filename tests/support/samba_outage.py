"""The test domain controller gone and back: ``scripts/samba-ad.sh halt|resume`` stop its
daemons and start them again on the same address, folder and domain — a file server that
crashed or rebooted, as the SMB source and ``watch smb://`` must ride out."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from tests.support.samba_ad import SCRIPT, DomainController, _servers_env


def _run(command: str, dc: DomainController) -> None:
    done = subprocess.run(
        [str(SCRIPT), command, dc.address], capture_output=True, text=True, timeout=300,
        env=_servers_env(), check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"samba-ad.sh {command} {dc.address}: {done.stderr}")


def halt(dc: DomainController) -> None:
    """Stop the DC's daemons (LDAP, Kerberos, SMB): the server gone."""
    _run("halt", dc)


def resume(dc: DomainController) -> None:
    """Start a halted DC again; returns when an SMB session to its share succeeds."""
    _run("resume", dc)


@contextlib.contextmanager
def down(dc: DomainController) -> Iterator[None]:
    """The DC halted for the block, started again after it whatever happens."""
    halt(dc)
    try:
        yield
    finally:
        resume(dc)
