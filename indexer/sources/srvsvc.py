"""A share's own permissions, read as Windows' *Computer Management* reads them: MS-SRVS
``NetrShareGetInfo`` at level 502 (``SHARE_INFO_502``, whose ``shi502_security_descriptor`` is
the share ACL), one DCE/RPC call over the ``\\PIPE\\srvsvc`` named pipe of ``IPC$``.

``smbprotocol`` has no srvsvc client, and this one call needs little: a bind (no RPC-level
authentication: the SMB session already is the caller, as on any ``ncacn_np`` pipe), one
request, and the NDR of one structure. It is written here over smbprotocol's own connection
rather than with impacket, which would be a second SMB stack (its own NTLM/Kerberos, its own
signing and encryption) beside the one every other read of the share uses.

Everything the server answers is read with bounds checked: a PDU that is not a response to
this call, a fragment or string running past its buffer, a size that disagrees with itself —
``ShareInfoError``; the server refusing (access denied, no such share) — ``ShareInfoRefused``
with its status. The caller fails closed on either (``indexer.sources.smb``).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

SRVSVC = uuid.UUID("4b324fc8-1670-01d3-1278-5a47bf6ee188")  # srvsvc 3.0 (MS-SRVS 1.9)
NDR = uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860")  # NDR 2.0 transfer syntax
NETR_SHARE_GET_INFO = 16  # opnum (MS-SRVS 3.1.4.10)
LEVEL = 502
PTYPE_REQUEST, PTYPE_RESPONSE, PTYPE_FAULT = 0, 2, 3
PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_BIND_NAK = 11, 12, 13
PFC_FIRST, PFC_LAST = 0x01, 0x02
MAX_FRAGMENT = 4280
_MAX_ANSWER = 1 << 20  # (a share's answer is a few hundred bytes; a megabyte is a lie)
_HEADER = struct.Struct("<BBBB4sHHI")  # version, minor, type, flags, data rep, lengths, call id
_LITTLE_ENDIAN = b"\x10\x00\x00\x00"
# The rights a client opening a pipe for a call asks (read, write, attributes, synchronize).
_PIPE_ACCESS = 0x0012019F


class ShareInfoError(ValueError):
    """An answer that is not a well-formed reply to NetrShareGetInfo."""


class ShareInfoRefused(ShareInfoError):
    """The server answered, and refused (``status``: its WERROR or RPC fault code)."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(f"{what} 0x{status:08x}" + _STATUS_NAMES.get(status, ""))
        self.status = status


_STATUS_NAMES = {
    0x5: " (ERROR_ACCESS_DENIED: the account may not read the share's permissions)",
    0x906: " (NERR_NetNameNotFound: no such share)",
    0x7B: " (ERROR_INVALID_NAME: no such share)",
    0x7C: " (ERROR_INVALID_LEVEL)",
    0x1C010002: " (nca_op_rng_error: the server has no such call)",
}


# ---- writing ----


def _pdu(ptype: int, call_id: int, body: bytes) -> bytes:
    length = _HEADER.size + len(body)
    head = _HEADER.pack(5, 0, ptype, PFC_FIRST | PFC_LAST, _LITTLE_ENDIAN, length, 0, call_id)
    return head + body


def bind_pdu(call_id: int = 1) -> bytes:
    """A bind to srvsvc 3.0 with the NDR 2.0 transfer syntax, no authentication."""
    syntax = SRVSVC.bytes_le + struct.pack("<HH", 3, 0)
    transfer = NDR.bytes_le + struct.pack("<I", 2)
    context = struct.pack("<HBB", 0, 1, 0) + syntax + transfer
    body = struct.pack("<HHIBBH", MAX_FRAGMENT, MAX_FRAGMENT, 0, 1, 0, 0) + context
    return _pdu(PTYPE_BIND, call_id, body)


def _wide(text: str) -> bytes:
    """An NDR conformant varying string of UTF-16 units, terminator included, padded to 4."""
    data = (text + "\0").encode("utf-16-le")
    count = len(data) // 2
    out = struct.pack("<III", count, 0, count) + data
    return out + b"\0" * (-len(out) % 4)


def share_info_request(share: str, call_id: int = 2) -> bytes:
    """``NetrShareGetInfo(NULL, share, 502)`` as one request PDU."""
    stub = struct.pack("<I", 0) + _wide(share) + struct.pack("<I", LEVEL)
    body = struct.pack("<IHH", len(stub), 0, NETR_SHARE_GET_INFO) + stub
    return _pdu(PTYPE_REQUEST, call_id, body)


# ---- reading ----


class _Reader:
    """NDR (little-endian, 4-byte alignment for what this call holds), bounds checked."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ShareInfoError(f"the answer ends before byte {self.pos + n}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def align(self) -> None:
        self.pos += -self.pos % 4

    def u32(self) -> int:
        self.align()
        value: int = struct.unpack("<I", self.take(4))[0]
        return value

    def wide(self) -> str:
        maximum, offset, actual = self.u32(), self.u32(), self.u32()
        if offset != 0 or actual > maximum:
            raise ShareInfoError(f"a string of {actual} of {maximum} units at offset {offset}")
        try:
            return self.take(2 * actual).decode("utf-16-le").rstrip("\0")
        except UnicodeDecodeError as exc:
            raise ShareInfoError(f"a string that is not UTF-16: {exc}") from None


def fragments(data: bytes, call_id: int) -> tuple[int, bytes, bool]:
    """The first PDU in ``data``: its type, its body (past the common header) and whether it
    is the last fragment. ShareInfoError when it is not whole or not this call's."""
    if len(data) < _HEADER.size:
        raise ShareInfoError(f"a PDU of {len(data)} bytes")
    version, _, ptype, flags, rep, length, auth, cid = _HEADER.unpack_from(data)
    if version != 5 or rep[:1] != b"\x10":
        raise ShareInfoError(f"not a little-endian DCE/RPC 5 PDU (version {version})")
    if length < _HEADER.size or length > len(data) or auth > length - _HEADER.size:
        raise ShareInfoError(f"a PDU of {length} bytes ({auth} of them authentication)")
    if cid != call_id:
        raise ShareInfoError(f"an answer to call {cid}, not {call_id}")
    return ptype, data[_HEADER.size : length - auth], bool(flags & PFC_LAST)


def check_bind_ack(ptype: int, body: bytes) -> None:
    """Refuse anything but a bind_ack that accepted srvsvc."""
    if ptype == PTYPE_BIND_NAK:
        reason = struct.unpack_from("<H", body)[0] if len(body) >= 2 else 0
        raise ShareInfoRefused(reason, "the srvsvc bind was refused:")
    if ptype != PTYPE_BIND_ACK:
        raise ShareInfoError(f"a PDU of type {ptype} where a bind_ack belongs")
    r = _Reader(body)
    r.take(8)  # max xmit, max recv, association group
    address = struct.unpack("<H", r.take(2))[0]
    r.take(address)
    r.align()
    results = r.take(4)[0]
    if results < 1:
        raise ShareInfoError("a bind_ack with no result")
    result, reason = struct.unpack("<HH", r.take(4))
    if result != 0:
        raise ShareInfoRefused(reason, "srvsvc was not accepted:")


def response_stub(ptype: int, body: bytes) -> bytes:
    """A response fragment's stub data (past alloc hint, context id and cancel count)."""
    if ptype == PTYPE_FAULT:
        status = struct.unpack_from("<I", body, 8)[0] if len(body) >= 12 else 0
        raise ShareInfoRefused(status, "NetrShareGetInfo failed with RPC fault")
    if ptype != PTYPE_RESPONSE:
        raise ShareInfoError(f"a PDU of type {ptype} where a response belongs")
    if len(body) < 8:
        raise ShareInfoError(f"a response of {len(body)} bytes")
    return body[8:]


def share_descriptor(stub: bytes) -> bytes | None:
    """The share ACL (a self-relative security descriptor's bytes) from NetrShareGetInfo's
    answer at level 502; None when the share has none set (Windows' default: Everyone)."""
    if len(stub) < 8:
        raise ShareInfoError(f"an answer of {len(stub)} bytes")
    status = struct.unpack_from("<I", stub, len(stub) - 4)[0]
    if status != 0:
        raise ShareInfoRefused(status, "NetrShareGetInfo answered")
    r = _Reader(stub[:-4])
    level, info = r.u32(), r.u32()
    if level != LEVEL or info == 0:
        raise ShareInfoError(f"an answer at level {level} ({'no' if not info else 'an'} info)")
    netname, _type, remark, _perms, _max, _uses, path, passwd, size, sd = (
        r.u32() for _ in range(10)
    )
    for pointer in (netname, remark, path, passwd):
        if pointer:
            r.wide()
    if not sd:
        return None
    count = r.u32()
    if count != size:
        raise ShareInfoError(f"a descriptor of {count} bytes said to be {size}")
    data = r.take(count)
    r.align()
    if r.pos != len(r.data):
        raise ShareInfoError(f"{len(r.data) - r.pos} bytes after the descriptor")
    return data or None


# ---- the call, over smbprotocol's session ----


def _exchange(pipe: Any, pdu: bytes, call_id: int, read_size: int) -> list[tuple[int, bytes]]:
    """Write one PDU, read fragments until the last: [(type, body)…]."""
    pipe.write(pdu, 0)
    buffer, out, total = b"", [], 0
    while True:
        if len(buffer) < _HEADER.size or len(buffer) < struct.unpack_from("<H", buffer, 8)[0]:
            chunk = bytes(pipe.read(0, read_size))
            if not chunk:
                raise ShareInfoError("the pipe closed mid-answer")
            total += len(chunk)
            if total > _MAX_ANSWER:
                raise ShareInfoError(f"an answer past {_MAX_ANSWER} bytes")
            buffer += chunk
            continue
        ptype, body, last = fragments(buffer, call_id)
        out.append((ptype, body))
        buffer = buffer[struct.unpack_from("<H", buffer, 8)[0] :]
        if last or ptype in (PTYPE_BIND_ACK, PTYPE_BIND_NAK, PTYPE_FAULT):
            return out


def read_share_descriptor(session: Any, server: str, share: str) -> bytes | None:
    """The share ACL of ``share`` on ``server`` through ``session`` (an smbprotocol Session):
    ``share_descriptor``'s answer; ShareInfoError (or an SMB error) when it cannot be read."""
    from smbprotocol.open import (
        CreateDisposition,
        CreateOptions,
        ImpersonationLevel,
        Open,
        ShareAccess,
    )
    from smbprotocol.tree import TreeConnect

    tree = TreeConnect(session, rf"\\{server}\IPC$")
    tree.connect()
    try:
        pipe = Open(tree, "srvsvc")
        pipe.create(
            ImpersonationLevel.Impersonation,
            _PIPE_ACCESS,
            0x80,  # FILE_ATTRIBUTE_NORMAL
            ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
            CreateDisposition.FILE_OPEN,
            CreateOptions.FILE_NON_DIRECTORY_FILE,
        )
        try:
            size = min(65536, int(session.connection.max_read_size))
            ((ptype, body),) = _exchange(pipe, bind_pdu(1), 1, size)[-1:]
            check_bind_ack(ptype, body)
            stub = b"".join(
                response_stub(t, b) for t, b in _exchange(pipe, share_info_request(share), 2, size)
            )
            return share_descriptor(stub)
        finally:
            pipe.close()
    finally:
        tree.disconnect()
