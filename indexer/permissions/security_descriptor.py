"""A Windows security descriptor (MS-DTYP 2.4.6, self-relative form) read from its bytes, and
written back (for tests, and to set a DACL exactly as given — ``smbcacls`` re-sorts).

The parser is strict about bounds and lenient about nothing else: every offset and size must
lie inside the buffer, every ACE inside its ACL, every SID inside its ACE. Anything that does
not is a ``SecurityDescriptorError``: the caller withdraws the document rather than guess who
may read it. A descriptor without a DACL (``SE_DACL_PRESENT`` unset, or set with no DACL) is a
*NULL DACL*, which Windows reads as "everyone": ``dacl`` is then ``None``; a DACL with no ACE
is ``()``, readable by no one. Every ACE type is kept with its mask and SID (object ACEs with
their SID found past their GUIDs); what each type means for reading is ``indexer.permissions
.dacl``'s business.

(``smbprotocol.security_descriptor`` models only the first three ACE types and accepts any
offset; ``pysmb``'s ``smb.security_descriptors`` reads more types but is a second SMB stack.
This module is the few dozen lines MS-DTYP needs, checked at every step.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SE_DACL_PRESENT = 0x0004
SE_SELF_RELATIVE = 0x8000

# ACE types whose body is an access mask and then a SID (MS-DTYP 2.4.4): allowed, denied,
# audit, alarm and their callback forms (application data after the SID), the mandatory label,
# resource attribute and scoped policy id.
_MASK_SID_TYPES = frozenset({0x00, 0x01, 0x02, 0x03, 0x09, 0x0A, 0x0D, 0x0E, 0x11, 0x12, 0x13})
# Object ACEs: mask, flags, up to two GUIDs, then the SID.
_OBJECT_TYPES = frozenset({0x05, 0x06, 0x07, 0x08, 0x0B, 0x0C, 0x0F, 0x10})
ACE_OBJECT_TYPE_PRESENT = 0x1
ACE_INHERITED_OBJECT_TYPE_PRESENT = 0x2
INHERIT_ONLY_ACE = 0x08
INHERITED_ACE = 0x10


class SecurityDescriptorError(ValueError):
    """Bytes that are not a well-formed self-relative security descriptor."""


@dataclass(frozen=True, slots=True)
class Ace:
    """One access-control entry: its type, flags, access mask and the SID it names."""

    type: int
    flags: int
    mask: int
    sid: str

    @property
    def inherit_only(self) -> bool:
        """Whether it only passes to children and takes no part in this object's check."""
        return bool(self.flags & INHERIT_ONLY_ACE)

    @property
    def inherited(self) -> bool:
        """Whether it came from the parent (as stored on the object)."""
        return bool(self.flags & INHERITED_ACE)


@dataclass(frozen=True, slots=True)
class SecurityDescriptor:
    """Owner, group and DACL (``None``: a NULL DACL; ``()``: an empty one)."""

    owner: str | None
    group: str | None
    dacl: tuple[Ace, ...] | None
    control: int = SE_DACL_PRESENT | SE_SELF_RELATIVE


def sid_from_bytes(data: bytes, offset: int, end: int) -> tuple[str, int]:
    """The SID at ``offset`` (not past ``end``) as its string form, and its length."""
    if offset < 0 or offset + 8 > end:
        raise SecurityDescriptorError(f"a SID at {offset} runs past its end ({end})")
    revision, count = data[offset], data[offset + 1]
    if revision != 1 or count > 15:
        raise SecurityDescriptorError(f"a SID at {offset} has revision {revision}, {count} parts")
    size = 8 + 4 * count
    if offset + size > end:
        raise SecurityDescriptorError(f"a SID at {offset} runs past its end ({end})")
    authority = int.from_bytes(data[offset + 2 : offset + 8], "big")
    subs = struct.unpack_from(f"<{count}I", data, offset + 8)
    # (decimal throughout, as retrieval_svc.acl.sids spells every SID)
    return "-".join(("S-1", str(authority), *map(str, subs))), size


def sid_to_bytes(sid: str) -> bytes:
    """A SID's string form (``S-1-5-21-…``) as its bytes; ValueError when it is not one."""
    parts = sid.split("-")
    if len(parts) < 3 or parts[0].upper() != "S" or parts[1] != "1" or len(parts) - 3 > 15:
        raise ValueError(f"{sid!r} is not a SID")
    authority = int(parts[2])
    subs = [int(p) for p in parts[3:]]
    if authority >= 2**48 or any(not 0 <= s < 2**32 for s in subs):
        raise ValueError(f"{sid!r} is not a SID")
    return (
        bytes((1, len(subs))) + authority.to_bytes(6, "big") + struct.pack(f"<{len(subs)}I", *subs)
    )


def _ace(data: bytes, offset: int, end: int) -> tuple[Ace, int]:
    if offset + 4 > end:
        raise SecurityDescriptorError(f"an ACE at {offset} runs past its ACL")
    ace_type, flags, size = struct.unpack_from("<BBH", data, offset)
    if size < 8 or offset + size > end:
        raise SecurityDescriptorError(f"an ACE at {offset} has size {size}, past its ACL")
    ace_end = offset + size
    (mask,) = struct.unpack_from("<I", data, offset + 4)
    if ace_type in _MASK_SID_TYPES:
        sid, _ = sid_from_bytes(data, offset + 8, ace_end)
    elif ace_type in _OBJECT_TYPES:
        if offset + 12 > ace_end:
            raise SecurityDescriptorError(f"an object ACE at {offset} runs past its end")
        (object_flags,) = struct.unpack_from("<I", data, offset + 8)
        at = offset + 12
        at += 16 if object_flags & ACE_OBJECT_TYPE_PRESENT else 0
        at += 16 if object_flags & ACE_INHERITED_OBJECT_TYPE_PRESENT else 0
        sid, _ = sid_from_bytes(data, at, ace_end)
    else:
        raise SecurityDescriptorError(f"an ACE at {offset} has unknown type {ace_type:#x}")
    return Ace(ace_type, flags, mask, sid), size


def _acl(data: bytes, offset: int) -> tuple[Ace, ...]:
    if offset < 20 or offset + 8 > len(data):
        raise SecurityDescriptorError(f"the DACL at {offset} lies outside the descriptor")
    revision, _, size, count, _ = struct.unpack_from("<BBHHH", data, offset)
    # ACL_REVISION (2), ACL_REVISION3 (3: what Samba's smbcacls writes) and ACL_REVISION_DS
    # (4): winnt.h's MIN_ACL_REVISION to MAX_ACL_REVISION, all of which Windows accepts.
    if revision not in (2, 3, 4):
        raise SecurityDescriptorError(f"the DACL has revision {revision}")
    end = offset + size
    if size < 8 or end > len(data):
        raise SecurityDescriptorError(f"the DACL's size {size} runs past the descriptor")
    aces: list[Ace] = []
    at = offset + 8
    for _ in range(count):
        ace, ace_size = _ace(data, at, end)
        aces.append(ace)
        at += ace_size
    return tuple(aces)


def parse_security_descriptor(data: bytes) -> SecurityDescriptor:
    """The descriptor in ``data``; ``SecurityDescriptorError`` for anything malformed."""
    if len(data) < 20:
        raise SecurityDescriptorError(f"{len(data)} bytes are too few for a security descriptor")
    revision, _, control, owner_at, group_at, _, dacl_at = struct.unpack_from("<BBHIIII", data)
    if revision != 1:
        raise SecurityDescriptorError(f"security descriptor revision {revision}")
    if not control & SE_SELF_RELATIVE:
        raise SecurityDescriptorError("the security descriptor is not self-relative")

    def sid_at(at: int) -> str | None:
        if at == 0:
            return None
        if at < 20:
            raise SecurityDescriptorError(f"a SID offset {at} points into the header")
        return sid_from_bytes(data, at, len(data))[0]

    dacl = _acl(data, dacl_at) if control & SE_DACL_PRESENT and dacl_at else None
    return SecurityDescriptor(sid_at(owner_at), sid_at(group_at), dacl, control)


def _ace_bytes(ace: Ace) -> bytes:
    if ace.type not in _MASK_SID_TYPES:
        raise ValueError(f"ACE type {ace.type:#x} cannot be written here")
    body = struct.pack("<I", ace.mask) + sid_to_bytes(ace.sid)
    return struct.pack("<BBH", ace.type, ace.flags, 4 + len(body)) + body


def security_descriptor_bytes(sd: SecurityDescriptor) -> bytes:
    """``sd`` in self-relative form, its ACEs in the order given (never re-sorted)."""
    parts = bytearray(20)
    owner_at = group_at = dacl_at = 0
    control = (sd.control | SE_SELF_RELATIVE) & ~SE_DACL_PRESENT
    if sd.owner is not None:
        owner_at = len(parts)
        parts += sid_to_bytes(sd.owner)
    if sd.group is not None:
        group_at = len(parts)
        parts += sid_to_bytes(sd.group)
    if sd.dacl is not None:
        control |= SE_DACL_PRESENT
        dacl_at = len(parts)
        aces = b"".join(_ace_bytes(ace) for ace in sd.dacl)
        parts += struct.pack("<BBHHH", 2, 0, 8 + len(aces), len(sd.dacl), 0) + aces
    struct.pack_into("<BBHIIII", parts, 0, 1, 0, control, owner_at, group_at, 0, dacl_at)
    return bytes(parts)
