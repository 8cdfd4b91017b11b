"""Outlook ``.msg`` files for the tests and the format benchmark: a mail (subject, sender,
recipients, body, attachments) written as Outlook writes one — MAPI properties as streams of
an OLE compound file ([MS-OXMSG] on [MS-CFB] version 3). No library writes ``.msg``; this is
the least of it the readers need, made here so the fixtures are our own.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

SECTOR, MINI = 512, 64
FREE, END, FAT_SECT, NONE = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF


@dataclass
class _Entry:
    name: str
    kind: int  # 1 storage, 2 stream, 5 root
    data: bytes = b""
    children: list[_Entry] = field(default_factory=list)
    index: int = 0
    start: int = END
    left: int = NONE
    right: int = NONE
    child: int = NONE


def _unicode(text: str) -> bytes:
    return text.encode("utf-16-le")


def _stream(tag: str, value: bytes) -> _Entry:
    return _Entry(f"__substg1.0_{tag}", 2, value)


def _properties(header: bytes, props: list[tuple[int, int, bytes]]) -> _Entry:
    """The property stream: a header, then (tag, flags, 8-byte value) entries."""
    body = b"".join(
        struct.pack("<II", tag, flags) + value.ljust(8, b"\0") for tag, flags, value in props
    )
    return _Entry("__properties_version1.0", 2, header + body)


def _filetime(when: datetime) -> bytes:
    ticks = int((when - datetime(1601, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000)
    return struct.pack("<Q", ticks)


def _order(entry: _Entry) -> tuple[int, str]:
    return (len(entry.name), entry.name.upper())  # [MS-CFB] 2.6.4: length first, then case-blind


def _tree(children: list[_Entry]) -> int:
    """Children as a balanced binary search tree (all black); the root's index."""
    if not children:
        return NONE
    ordered = sorted(children, key=_order)
    middle = len(ordered) // 2
    node = ordered[middle]
    node.left = _tree(ordered[:middle])
    node.right = _tree(ordered[middle + 1 :])
    return node.index


def _pad(blob: bytes, size: int) -> bytes:
    return blob.ljust(-(-len(blob) // size) * size, b"\0")


def _compound(root: _Entry) -> bytes:
    """An OLE compound file holding ``root``'s storages and streams: streams under 4,096
    bytes in the mini stream, larger ones in sectors of their own."""
    entries: list[_Entry] = []

    def walk(entry: _Entry) -> None:
        entry.index = len(entries)
        entries.append(entry)
        for child in entry.children:
            walk(child)

    walk(root)
    for entry in entries:
        entry.child = _tree(entry.children)
    streams = [e for e in entries if e.kind == 2 and e.data]
    small = [e for e in streams if len(e.data) < 4096]
    large = [e for e in streams if len(e.data) >= 4096]
    mini, mini_fat = bytearray(), list[int]()
    for entry in small:
        count = -(-len(entry.data) // MINI)
        entry.start = len(mini_fat)
        mini_fat += [len(mini_fat) + i + 1 for i in range(count - 1)] + [END]
        mini += _pad(entry.data, MINI)
    minifat_blob = b"".join(struct.pack("<I", n) for n in mini_fat)
    counts = {
        "dir": -(-len(entries) * 128 // SECTOR),
        "minifat": -(-len(minifat_blob) // SECTOR),
        "mini": -(-len(mini) // SECTOR),
    }
    large_counts = [-(-len(e.data) // SECTOR) for e in large]
    fat_count = 1
    while fat_count * (SECTOR // 4) < fat_count + sum(counts.values()) + sum(large_counts):
        fat_count += 1
    fat: list[int] = [FAT_SECT] * fat_count

    def allocate(count: int) -> int:
        if not count:
            return END
        start = len(fat)
        fat.extend([start + i + 1 for i in range(count - 1)] + [END])
        return start

    first_dir = allocate(counts["dir"])
    first_minifat = allocate(counts["minifat"])
    root.start = allocate(counts["mini"])
    for entry, count in zip(large, large_counts, strict=True):
        entry.start = allocate(count)
    fat += [FREE] * (fat_count * (SECTOR // 4) - len(fat))
    directory = bytearray()
    for entry in entries:
        name = _unicode(entry.name) + b"\0\0"
        size = len(mini) if entry.kind == 5 else len(entry.data)
        directory += name.ljust(64, b"\0") + struct.pack(
            "<HBBIII16sIQQIQ", len(name), entry.kind, 1, entry.left, entry.right, entry.child,
            b"\0" * 16, 0, 0, 0, entry.start if entry.kind != 1 else 0, size,
        )  # fmt: skip
    difat = list(range(fat_count)) + [FREE] * (109 - fat_count)
    header = (
        bytes.fromhex("D0CF11E0A1B11AE1") + b"\0" * 16
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + b"\0" * 6
        + struct.pack("<IIIIIIIII", 0, fat_count, first_dir, 0, 4096, first_minifat,
                      counts["minifat"], END, 0)
        + struct.pack("<109I", *difat)
    )  # fmt: skip
    body = b"".join(struct.pack("<I", n) for n in fat)
    body += _pad(bytes(directory), SECTOR) + _pad(minifat_blob, SECTOR) + _pad(bytes(mini), SECTOR)
    body += b"".join(_pad(e.data, SECTOR) for e in large)
    return header + body


@dataclass
class Attached:
    """A mail attached to a mail (an Outlook "item" attachment: an embedded message)."""

    name: str
    subject: str
    body: str
    sender: tuple[str, str]
    to: list[tuple[str, str]]


def _message(
    header: bytes,
    subject: str,
    body: str,
    sender: tuple[str, str],
    to: list[tuple[str, str]],
    attachments: Sequence[tuple[str, bytes] | Attached],
    when: datetime,
) -> list[_Entry]:
    """A message's streams and storages (the root's, or an embedded message's)."""
    children = [
        _properties(header, [(0x00390040, 6, _filetime(when)), (0x0E060040, 6, _filetime(when))]),
        _stream("001A001F", _unicode("IPM.Note")),
        _stream("0037001F", _unicode(subject)),
        _stream("1000001F", _unicode(body)),
        _stream("0C1A001F", _unicode(sender[0])),
        _stream("0C1F001F", _unicode(sender[1])),
        _stream("5D01001F", _unicode(sender[1])),
        _stream("0E04001F", _unicode("; ".join(name for name, _ in to))),
    ]
    for i, (name, address) in enumerate(to):
        recipient = _Entry(f"__recip_version1.0_#{i:08X}", 1)
        recipient.children = [
            _properties(b"\0" * 8, [(0x0C150003, 6, struct.pack("<I", 1))]),  # MAPI_TO
            _stream("3001001F", _unicode(name)),
            _stream("39FE001F", _unicode(address)),
        ]
        children.append(recipient)
    for i, item in enumerate(attachments):
        attachment = _Entry(f"__attach_version1.0_#{i:08X}", 1)
        if isinstance(item, Attached):  # ATTACH_EMBEDDED_MSG: the message as a storage
            inner = _Entry("__substg1.0_3701000D", 1)
            small = struct.pack("<8sIIII", b"\0" * 8, len(item.to), 0, len(item.to), 0)
            inner.children = _message(
                small, item.subject, item.body, item.sender, item.to, (), when
            )
            attachment.children = [
                _properties(b"\0" * 8, [(0x37050003, 6, struct.pack("<I", 5))]),
                _stream("3707001F", _unicode(item.name)),
                _stream("3704001F", _unicode(item.name)),
                inner,
            ]
        else:
            name, data = item
            attachment.children = [
                _properties(b"\0" * 8, [(0x37050003, 6, struct.pack("<I", 1))]),
                _stream("3707001F", _unicode(name)),
                _stream("3704001F", _unicode(name)),
                _stream("37010102", data),
            ]
        children.append(attachment)
    return children


def msg(
    subject: str,
    body: str,
    sender: tuple[str, str],
    to: list[tuple[str, str]],
    attachments: Sequence[tuple[str, bytes] | Attached] = (),
    sent: datetime | None = None,
) -> bytes:
    """A mail as an Outlook ``.msg`` file (an ``Attached`` among ``attachments``: a mail
    attached to it, as Outlook attaches an item)."""
    when = sent or datetime(2026, 3, 2, 1, 30, tzinfo=UTC)
    root = _Entry("Root Entry", 5)
    header = struct.pack(
        "<8sIIII8s", b"\0" * 8, len(to), len(attachments), len(to), len(attachments), b"\0" * 8
    )
    root.children = _message(header, subject, body, sender, to, attachments, when)
    named = _Entry("__nameid_version1.0", 1)  # named properties: none, but the streams exist
    named.children = [_stream(tag, b"") for tag in ("00020102", "00030102", "00040102")]
    root.children.append(named)
    return _compound(root)
