"""Where an ``smb://`` source's share is and who the indexer is on it: the address parsed
(``parse_smb_url``), the credentials (``SmbCredentials``), and what says the server stopped
answering rather than answered about a file (``server_gone``).

Credentials come from the environment, never the command line: ``RSVC_SMB_USER``
(``CORP\\svc-index`` or ``svc-index@corp.example.org``) and ``RSVC_SMB_PASSWORD``, or
``RSVC_SMB_PASSWORD_FILE`` (a file holding it, as a Kubernetes Secret mounts it);
``RSVC_SMB_AUTH`` ``negotiate`` (Kerberos, else NTLM: the default), ``ntlm`` or ``kerberos``
(a ticket from ``KRB5CCNAME`` when no password is given; needs ``smbprotocol[kerberos]``);
``RSVC_SMB_ENCRYPT=1`` to require SMB 3 encryption.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse


@dataclass(frozen=True, slots=True)
class SmbCredentials:
    """Who the indexer is on the share (from the environment: see the module)."""

    user: str | None
    password: str | None
    auth: str = "negotiate"
    encrypt: bool = False

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> SmbCredentials:
        """The credentials the environment gives; ValueError naming what is wrong."""
        env = dict(os.environ) if env is None else env
        password = env.get("RSVC_SMB_PASSWORD")
        if (path := env.get("RSVC_SMB_PASSWORD_FILE")) and password is None:
            try:
                password = Path(path).read_text(encoding="utf-8").splitlines()[0]
            except (OSError, IndexError, UnicodeDecodeError) as exc:
                raise ValueError(f"RSVC_SMB_PASSWORD_FILE {path} cannot be read: {exc}") from None
        auth = env.get("RSVC_SMB_AUTH", "negotiate").lower()
        if auth not in ("negotiate", "ntlm", "kerberos"):
            raise ValueError(f"RSVC_SMB_AUTH is {auth!r}: use negotiate, ntlm or kerberos")
        user = env.get("RSVC_SMB_USER")
        if auth == "ntlm" and (not user or password is None):
            raise ValueError("NTLM needs RSVC_SMB_USER and RSVC_SMB_PASSWORD (or _FILE)")
        return cls(user, password, auth, env.get("RSVC_SMB_ENCRYPT", "") in ("1", "true", "yes"))


def parse_smb_url(url: str) -> tuple[str, int, str, str]:
    """``smb://server[:port]/share/folder…`` as (server, port, share, folder with ``/``)."""
    parsed = urlparse(url)
    parts = [unquote(p) for p in parsed.path.split("/") if p]
    if parsed.scheme != "smb" or not parsed.hostname or not parts:
        raise ValueError(f"{url!r} is not smb://server/share/folder")
    if parsed.username or parsed.password:
        raise ValueError(
            "smb:// takes no credentials in the address: set RSVC_SMB_USER and "
            "RSVC_SMB_PASSWORD (or RSVC_SMB_PASSWORD_FILE)"
        )
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"{url!r}: '.' and '..' are not folders of a share")
    return parsed.hostname, parsed.port or 445, parts[0], "/".join(parts[1:])


class ServerGone(Exception):
    """The server stopped answering (the connection refused, closed or reset) while a file's
    descriptor was read: an outage of the source, not a fact about the file."""


def server_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the server is unreachable (a connection refused, closed, reset or
    timed out: smbclient reports a failed connect as ValueError) rather than answering about
    the file with an NT status (``SMBOSError``, ``SMBResponseException``)."""
    from smbprotocol.exceptions import SMBException, SMBOSError, SMBResponseException

    if isinstance(exc, (SMBOSError, SMBResponseException, UnicodeError)):
        return False
    return isinstance(exc, (SMBException, ConnectionError, TimeoutError, ValueError))
