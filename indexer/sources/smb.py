"""A Windows file share (SMB 2/3) as a source, read without mounting it: ``smb://server/share/
folder``.

Each file is listed with its own security descriptor (owner, group and DACL, read through a
handle opened for ``READ_CONTROL`` alone, never following a reparse point), and who may read
it is decided from that DACL as Windows decides it (``indexer.permissions.dacl``) and from the
share's own ACL, which Windows applies as well (read once per listing through srvsvc:
``indexer.sources.srvsvc``; combined in ``indexer.permissions.share``): they are the document's
roles, which a rules file, sidecar or tag may only narrow. A descriptor that cannot be read or
parsed leaves the file withdrawn, never public; a share ACL that cannot be read or parsed is an
outage of the whole source (nothing listed, nothing pruned, nothing published wider).

As on a local folder, nothing is followed: a reparse point of any kind — a symbolic link, a
junction, a DFS link, a mount point — is passed over and named. A folder the account cannot
list is a listing failure (the run fails and prunes nothing below it), never an empty
folder; the share itself unreachable, or a server gone mid-run, is an outage of the whole
source (nothing pruned). A file that vanishes between its folder's listing and the reading of
its DACL is gone; one the server refuses to describe is withdrawn.

Who the indexer is on the share and where the share is: ``indexer.sources.smb_connection``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterator
from typing import Any

from indexer.documents import DocumentError
from indexer.metadata_limits import MAX_SIDECAR_BYTES
from indexer.passing_over import SIDECAR_SUFFIX, PassedOver, by_design
from indexer.permissions.dacl import FileAccess, file_access
from indexer.permissions.security_descriptor import (
    SecurityDescriptorError,
    parse_security_descriptor,
)
from indexer.permissions.share import with_share
from indexer.sources.base import ListingFailure, ObjectRef, parse_sidecar
from indexer.sources.smb_connection import ServerGone, SmbCredentials, parse_smb_url, server_gone
from indexer.sources.smb_share import share_acl_or_why
from retrieval_svc.acl.errors import PolicyError
from retrieval_svc.acl.known_sids import NONE_KNOWN, KnownSids
from retrieval_svc.words import problem, say

__all__ = [
    "REPARSE_REASON",
    "SIDECAR_OFF_REASON",
    "ServerGone",
    "SmbCredentials",
    "SmbSource",
    "parse_smb_url",
]

log = logging.getLogger("indexer.pipeline")
FAIL_CLOSED_EXAMPLES = 5  # documents named per unknown SID in the run's summary

REPARSE_REASON = "a reparse point (a link, junction or DFS link): not followed"
SIDECAR_OFF_REASON = "a sidecar on a share: not read (--share-sidecars)"
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_REPARSE_POINT = 0x400
READ_CONTROL = 0x00020000
FILE_READ_ATTRIBUTES = 0x80
FILE_OPEN_REPARSE_POINT = 0x00200000
# OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION
_SECURITY_INFORMATION = 0x1 | 0x2 | 0x4
_MAX_DESCRIPTOR = 65536  # (an ACL is at most 64 KiB)
_LINK_STAMP = "link"  # a sidecar that is a reparse point: its document's roles cannot be read


def _stamp(sidecar: Any) -> str:
    """A sidecar's version as listed ("" for none; a reparse point's says so)."""
    if sidecar is None:
        return ""
    info = sidecar.smb_info
    stamp = f"{info.last_write_time.timestamp():.6f}-{info.end_of_file:x}"
    return (
        f"{_LINK_STAMP}-{stamp}" if info.file_attributes & FILE_ATTRIBUTE_REPARSE_POINT else stamp
    )


def _why(exc: BaseException) -> str:
    return f"cannot be listed: {type(exc).__name__}: {exc}"


class SmbSource:
    """``smb://server/share/folder``: files, their versions (last write time and size) and
    who reads each (its DACL)."""

    def __init__(self, url: str, credentials: SmbCredentials | None = None) -> None:
        self.server, self.port, self.share, self.folder = parse_smb_url(url)
        self.credentials = credentials or SmbCredentials.from_env()
        base = f"smb://{self.server}/{self.share}/" + (self.folder + "/" if self.folder else "")
        self.description = base.rstrip("/")
        self.location = base
        self.passed_over = PassedOver()
        self.failures: list[ListingFailure] = []
        self._cache: dict[str, Any] = {}  # (this source's own connections and sessions)
        # Whose holders the directory knows (a deny naming another SID refuses every person):
        # ``directory`` reads it again at each whole listing, so a sync that read more or
        # fewer SIDs is in force from the next run or re-listing (a file looked at before any
        # listing reads it first). Unset: none known.
        self.directory: Callable[[], KnownSids] | None = None
        self.known: Container[str] | None = None
        # Documents a deny naming an unknown SID refused to every person: SID → their names.
        self.fail_closed: dict[str, list[str]] = {}
        self.fail_closed_count: dict[str, int] = {}
        # Read ``<file>.meta.json`` sidecars (``--share-sidecars``)? Off by default: on a share
        # whoever may create a file in a folder may write one, whatever they may do to the
        # document; passed over and named instead.
        self.sidecars = False
        # The share's ACL as the last listing read it (None: it narrows nothing).
        self._share: FileAccess | None = None
        self._share_read = False
        self._share_failure: str | None = None

    # ---- paths and connections ----

    def _unc(self, key: str) -> str:
        parts = [p for p in (self.folder + "/" + key).split("/") if p]
        return "\\".join((f"\\\\{self.server}", self.share, *parts))

    def _kwargs(self) -> dict[str, Any]:
        c = self.credentials
        kwargs: dict[str, Any] = {
            "port": self.port,
            "connection_cache": self._cache,
            "auth_protocol": c.auth,
        }
        if c.user:
            kwargs["username"] = c.user
        if c.password is not None:
            kwargs["password"] = c.password
        if c.encrypt:
            kwargs["encrypt"] = True
        return kwargs

    def close(self) -> None:
        """Close this source's connections."""
        from smbclient import reset_connection_cache

        reset_connection_cache(connection_cache=self._cache)

    # ---- the share's own permissions ----

    def _read_share(self) -> str | None:
        """Read the share's ACL for this listing: None when read, else why not (the source
        is then out: nothing listed, pruned or published; a file looked at is withdrawn)."""
        self._share, self._share_failure = share_acl_or_why(
            self.server, self.port, self.share, self.credentials, self._cache, self._known()
        )
        self._share_read = self._share_failure is None
        return self._share_failure

    # ---- listing ----

    def list(self) -> Iterator[ObjectRef]:
        """The share folder's files, folder by folder in name order, each with its DACL
        (judged against the SIDs the directory knows, read again now)."""
        self.refresh_known()
        return self._walk("")

    def _known(self) -> Container[str]:
        """The SIDs the directory knows, read first where no listing has read them yet."""
        if self.known is None:
            self.refresh_known()
        return self.known if self.known is not None else NONE_KNOWN

    def refresh_known(self) -> None:
        """Read again which SIDs the directory knows; where it cannot be read, none (every
        deny naming a SID that is not well-known refuses every person), said on stderr."""
        self.fail_closed, self.fail_closed_count = {}, {}
        if self.directory is None:
            self.known = NONE_KNOWN
            return
        try:
            self.known = self.directory()
        except PolicyError as exc:
            self.known = NONE_KNOWN
            log.warning(say("sids_unknown", why=problem(exc)))

    def under(self, folder: str) -> Iterator[ObjectRef]:
        """The files below the folder ``folder`` (a key), as ``list`` lists them."""
        if not folder or any(p in ("", ".", "..") for p in folder.split("/")):
            return iter(())
        return self._walk(folder)

    def look(self, key: str) -> ObjectRef | None:
        """The file at ``key`` now, as a listing gives it; None where it would give nothing."""
        if not key or any(p in ("", ".", "..") for p in key.split("/")):
            return None
        if not self._share_read:
            self._read_share()  # (when it cannot be read, the file is withdrawn: ``_dacl``)
        folder, _, name = key.rpartition("/")
        entry = self._entries(folder, name).get(name)
        if entry is None or entry.smb_info.file_attributes & (
            FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DIRECTORY
        ):
            return None
        return self._ref(key, entry, self._entries(folder, name + SIDECAR_SUFFIX))

    def _entries(self, folder: str, pattern: str = "*") -> dict[str, Any]:
        import smbclient
        from smbprotocol.exceptions import SMBOSError

        try:
            found = smbclient.scandir(self._unc(folder), pattern, **self._kwargs())
            return {e.name: e for e in found}
        except SMBOSError:
            return {}

    def _walk(self, top: str) -> Iterator[ObjectRef]:
        import smbclient
        from smbprotocol.exceptions import SMBException, SMBOSError

        if (why := self._read_share()) is not None:
            self.failures.append(ListingFailure(top, why, "rest"))
            return
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                entries = {
                    e.name: e for e in smbclient.scandir(self._unc(folder), **self._kwargs())
                }
            except (SMBOSError, UnicodeError) as exc:
                # (UnicodeError: a name that is no UTF-16 — NTFS keeps an unpaired surrogate
                # — is an answer about this folder, never the server gone: the folder's
                # documents are withdrawn, the rest of the share listed)
                scope = "rest" if folder == top == "" else "folder"
                self.failures.append(ListingFailure(folder, _why(exc), scope))
                continue
            except (SMBException, OSError, ValueError) as exc:  # the server gone: an outage
                self.failures.append(ListingFailure(folder, _why(exc), "rest"))
                return
            below = []
            for name in sorted(entries):
                entry = entries[name]
                key = f"{folder}/{name}" if folder else name
                attributes = entry.smb_info.file_attributes
                if attributes & FILE_ATTRIBUTE_REPARSE_POINT:
                    self.passed_over.add(key, REPARSE_REASON)
                elif attributes & FILE_ATTRIBUTE_DIRECTORY:
                    below.append(key)
                else:
                    try:
                        ref = self._ref(key, entry, entries)
                    except ServerGone as exc:
                        why = _why(exc.__cause__ or exc)
                        self.failures.append(ListingFailure(key, why, "rest"))
                        return
                    if ref is not None:
                        yield ref
            stack.extend(reversed(below))

    def _ref(self, key: str, entry: Any, entries: dict[str, Any]) -> ObjectRef | None:
        name = key.rsplit("/", 1)[-1]
        if name.endswith(SIDECAR_SUFFIX) and not self.sidecars and not name.startswith("."):
            self.passed_over.add(key, SIDECAR_OFF_REASON)
            return None
        if name.endswith(SIDECAR_SUFFIX) or self.passed_over.unwanted(key) or by_design(key):
            return None
        if self.passed_over.unsupported(key):
            return None
        info = entry.smb_info
        sidecar = entries.get(name + SIDECAR_SUFFIX) if self.sidecars else None
        dacl = self._dacl(key)
        if dacl is None:  # (gone since its folder was listed)
            return None
        uri = self.location + key
        return ObjectRef(
            key=key,
            uri=uri,
            etag=f"{info.last_write_time.timestamp():.6f}-{info.end_of_file:x}",
            size=int(info.end_of_file),
            identity=uri,
            sidecar=_stamp(sidecar),
            dacl=dacl,
        )

    def _dacl(self, key: str) -> FileAccess | str | None:
        """Who reads ``key`` by its DACL and the share's ACL; why that cannot be told; None
        when it is gone. ServerGone when the server stopped answering: that is no answer about
        the file."""
        if self._share_failure is not None:
            return self._share_failure
        try:
            raw = self.security_descriptor(key)
        except Exception as exc:  # (any failure the server answered: withdrawn, never public)
            if server_gone(exc):
                raise ServerGone(str(exc)) from exc
            if isinstance(exc, OSError) and exc.errno == 2:  # (ENOENT: gone)
                return None
            return f"its security descriptor cannot be read: {type(exc).__name__}: {exc}"
        try:
            access = file_access(parse_security_descriptor(raw), key, self._known())
        except SecurityDescriptorError as exc:
            return f"its security descriptor is malformed: {exc}"
        access = with_share(access, self._share, self.share)
        for sid in access.unknown:
            self.fail_closed_count[sid] = self.fail_closed_count.get(sid, 0) + 1
            names = self.fail_closed.setdefault(sid, [])
            if len(names) < FAIL_CLOSED_EXAMPLES:
                names.append(key)
        return access

    def security_descriptor(self, key: str) -> bytes:
        """The raw security descriptor (owner, group, DACL) of ``key``, read through a handle
        opened for READ_CONTROL alone, not following a reparse point."""
        from smbclient._io import SMBFileTransaction, SMBRawIO
        from smbprotocol.open import InfoType, SMB2QueryInfoRequest, SMB2QueryInfoResponse

        raw = SMBRawIO(
            self._unc(key),
            mode="r",
            share_access="rwd",
            desired_access=READ_CONTROL | FILE_READ_ATTRIBUTES,
            create_options=FILE_OPEN_REPARSE_POINT,
            **self._kwargs(),
        )
        request = SMB2QueryInfoRequest()
        request["info_type"] = InfoType.SMB2_0_INFO_SECURITY
        request["output_buffer_length"] = _MAX_DESCRIPTOR
        request["additional_information"] = _SECURITY_INFORMATION

        def receive(sent: Any) -> bytes:
            response = raw.fd.connection.receive(sent)
            answer = SMB2QueryInfoResponse()
            answer.unpack(response["data"].get_value())
            return bytes(answer["buffer"].get_value())

        with SMBFileTransaction(raw) as transaction:
            request["file_id"] = raw.fd.file_id
            transaction += (request, receive)
        assert transaction.results is not None
        return bytes(transaction.results[0])

    # ---- reading ----

    def _read(self, key: str, limit: int | None = None) -> bytes:
        from smbclient._io import SMBRawIO

        raw = SMBRawIO(
            self._unc(key),
            mode="r",
            share_access="rw",
            create_options=FILE_OPEN_REPARSE_POINT,
            **self._kwargs(),
        )
        raw.open()
        try:
            if limit is None:
                return bytes(raw.readall())
            return bytes(raw.read(limit) or b"")
        finally:
            raw.close()

    def read(self, ref: ObjectRef) -> bytes:
        return self._read(ref.key)

    def tags(self, ref: ObjectRef) -> dict[str, str]:  # noqa: ARG002
        return {}  # (files have no tags: the CLI refuses --roles-tag for a share)

    def sidecar(self, ref: ObjectRef) -> dict[str, Any]:
        if not ref.sidecar or not self.sidecars:
            return {}
        name = ref.key + SIDECAR_SUFFIX
        if ref.sidecar.startswith(_LINK_STAMP):
            raise DocumentError(f"sidecar {name} is a reparse point: links are never followed")
        try:
            data = self._read(name, MAX_SIDECAR_BYTES + 1)
        except OSError as exc:
            if exc.errno == 2:
                return {}
            raise DocumentError(f"sidecar {name} cannot be read: {exc}") from None
        return parse_sidecar(data, name.rsplit("/", 1)[-1])
