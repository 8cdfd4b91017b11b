"""The share's own ACL for an ``smb://`` source, read at the start of every listing over the
same SMB session as its files (srvsvc ``NetrShareGetInfo`` level 502: ``indexer.sources
.srvsvc``) and put in the index's terms (``indexer.permissions.share``).

Its failures are told apart as the file reads tell them apart: the server answered and
refused, or answered what cannot be parsed — the share's permissions are unknown, so the
source is out (``SHARE_UNREADABLE``), never published by its files' DACLs alone; the server did
not answer — an outage like any other (``cannot be listed``).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from indexer.permissions.dacl import FileAccess
from indexer.permissions.security_descriptor import SecurityDescriptorError
from indexer.permissions.share import share_access
from indexer.sources.srvsvc import ShareInfoError, read_share_descriptor

SHARE_UNREADABLE = "the share's permissions (its share ACL) cannot be read: "


def read_share_acl(
    server: str, port: int, share: str, credentials: Any, cache: dict[str, Any],
    known: Container[str],
) -> FileAccess | None:  # fmt: skip
    """Who the share's ACL lets through (None: it narrows nothing), read now; raises when it
    cannot be read or parsed. ``credentials``: an ``SmbCredentials``; ``cache``: the source's
    connection cache (its session is reused)."""
    from smbclient._pool import register_session

    session = register_session(
        server,
        username=credentials.user,
        password=credentials.password,
        port=port,
        encrypt=True if credentials.encrypt else None,
        connection_cache=cache,
        auth_protocol=credentials.auth,
    )
    return share_access(read_share_descriptor(session, server, share), share, known)


def share_acl_or_why(
    server: str, port: int, share: str, credentials: Any, cache: dict[str, Any],
    known: Container[str],
) -> tuple[FileAccess | None, str | None]:  # fmt: skip
    """``read_share_acl``'s answer and None, or None and why it could not be read."""
    from smbprotocol.exceptions import SMBException, SMBResponseException

    try:
        return read_share_acl(server, port, share, credentials, cache, known), None
    except (ShareInfoError, SecurityDescriptorError, SMBResponseException) as exc:
        return None, f"{SHARE_UNREADABLE}{type(exc).__name__}: {exc}"
    except (SMBException, OSError, ValueError) as exc:  # (the server gone: an outage)
        return None, f"cannot be listed: {type(exc).__name__}: {exc}"
