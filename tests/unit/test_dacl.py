"""Who reads a file, from its DACL: the index's sets against Windows' own access check."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.permissions.dacl import (
    EVERY_PERSON,
    EVERYONE,
    FILE_READ_DATA,
    GENERIC_ALL,
    GENERIC_READ,
    file_access,
    may_read,
    visible,
)
from indexer.permissions.security_descriptor import (
    INHERIT_ONLY_ACE,
    INHERITED_ACE,
    Ace,
    SecurityDescriptor,
    SecurityDescriptorError,
    parse_security_descriptor,
    security_descriptor_bytes,
)

LEGAL, HR, ALICE, INTERN = (
    "S-1-5-21-1-2-3-1101",
    "S-1-5-21-1-2-3-1102",
    "S-1-5-21-1-2-3-1103",
    ("S-1-5-21-1-2-3-1104"),
)
ADMINS, OWNER = "S-1-5-32-544", "S-1-5-21-1-2-3-500"
# The SIDs the directory sync read (their holders are known): every test SID.
KNOWN = frozenset({LEGAL, HR, ALICE, INTERN, ADMINS, OWNER})
BUILTIN_USERS = "S-1-5-32-545"
READ = 0x120089  # FILE_GENERIC_READ
WRITE_ONLY = 0x000116  # write data, append, write EA and attributes: no FILE_READ_DATA


def allow(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(0x00, flags, mask, sid)


def deny(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(0x01, flags, mask, sid)


def sd(*aces: Ace, owner: str = OWNER) -> SecurityDescriptor:
    return SecurityDescriptor(owner, None, tuple(aces))


def person(*sids: str) -> frozenset[str]:
    """A person's token as the index holds it: their SIDs and the one every person has."""
    return frozenset({EVERYONE, *sids})


# (descriptor, token, Windows reads, the index shows) — the index's answer differs only where
# ``exact`` is False, and then only narrower.
CASES = [
    pytest.param(SecurityDescriptor(OWNER, None, None), person(), True, True, id="null-dacl"),
    pytest.param(sd(), person(ADMINS), False, False, id="empty-dacl"),
    pytest.param(sd(allow(LEGAL)), person(LEGAL), True, True, id="allow"),
    pytest.param(sd(allow(LEGAL)), person(HR), False, False, id="allow-other"),
    pytest.param(sd(allow("S-1-1-0")), person(), True, True, id="everyone"),
    pytest.param(sd(allow("S-1-5-11")), person(), True, True, id="authenticated-users"),
    pytest.param(sd(allow("S-1-5-11")), frozenset(), False, False, id="anonymous"),
    pytest.param(sd(allow("S-1-3-0")), person(OWNER), False, False, id="creator-owner"),
    pytest.param(sd(allow("S-1-3-4")), person(OWNER), True, True, id="owner-rights"),
    pytest.param(sd(allow(ADMINS)), person(ADMINS), True, True, id="administrators"),
    pytest.param(sd(allow(LEGAL, GENERIC_READ)), person(LEGAL), True, True, id="generic-read"),
    pytest.param(sd(allow(LEGAL, GENERIC_ALL)), person(LEGAL), True, True, id="generic-all"),
    pytest.param(sd(allow(LEGAL, WRITE_ONLY)), person(LEGAL), False, False, id="write-only"),
    pytest.param(
        sd(allow(LEGAL, READ, INHERIT_ONLY_ACE)), person(LEGAL), False, False, id="inherit-only"
    ),
    pytest.param(sd(allow(LEGAL, READ, INHERITED_ACE)), person(LEGAL), True, True, id="inherited"),
    pytest.param(
        sd(deny(INTERN), allow(LEGAL)), person(LEGAL, INTERN), False, False, id="deny-first"
    ),
    pytest.param(sd(deny(INTERN), allow(LEGAL)), person(LEGAL), True, True, id="deny-other"),
    pytest.param(
        sd(deny(INTERN, WRITE_ONLY), allow(LEGAL)),
        person(LEGAL, INTERN),
        True,
        True,
        id="deny-of-writing",
    ),
    pytest.param(
        sd(allow(LEGAL), deny(INTERN)), person(LEGAL, INTERN), True, True, id="deny-after-all"
    ),
    pytest.param(
        sd(allow(LEGAL), deny(INTERN), allow(HR)),
        person(LEGAL, INTERN),
        True,
        False,
        id="non-canonical-narrowed",
    ),
    pytest.param(
        sd(allow(ALICE), deny(INTERN, READ, INHERITED_ACE), allow(LEGAL, READ, INHERITED_ACE)),
        person(ALICE, INTERN),
        True,
        False,
        id="explicit-allow-inherited-deny-narrowed",
    ),
    pytest.param(
        sd(allow(ALICE), deny(INTERN, READ, INHERITED_ACE), allow(LEGAL, READ, INHERITED_ACE)),
        person(LEGAL, INTERN),
        False,
        False,
        id="inherited-deny-of-inherited-allow",
    ),
    pytest.param(
        sd(deny("S-1-5-11"), allow(LEGAL)), person(LEGAL), False, False, id="deny-everyone"
    ),
    # A caller without the every-person role (which every person the directory gives SIDs
    # holds) is still refused by a deny of Everyone: the allows after it are gone.
    pytest.param(
        sd(deny(EVERYONE), allow(LEGAL)), frozenset({LEGAL}), True, False, id="deny-all-alone"
    ),
    pytest.param(
        sd(Ace(0x09, 0, READ, LEGAL)), person(LEGAL), False, False, id="callback-allow-ignored"
    ),
    pytest.param(
        sd(Ace(0x0A, 0, READ, INTERN), allow(LEGAL)),
        person(LEGAL, INTERN),
        False,
        False,
        id="callback-deny-denies",
    ),
]


@pytest.mark.parametrize(("descriptor", "token", "windows", "index"), CASES)
def test_truth_table(
    descriptor: SecurityDescriptor, token: frozenset[str], windows: bool, index: bool
) -> None:
    access = file_access(descriptor, "法务/合同.md", KNOWN)
    assert may_read(descriptor, token) is windows
    assert visible(access, token) is index
    if windows != index:  # (only narrower; for a person, only where it says so)
        assert windows and not index
        assert not access.exact or EVERYONE not in token


def test_the_deciding_ace_is_named() -> None:
    access = file_access(sd(deny(INTERN), allow(LEGAL, READ, INHERITED_ACE)), "法务/合同.md", KNOWN)
    shown = [d.shown() for d in access.deciders]
    assert shown == [f"deny {INTERN} on 法务/合同.md", f"allow {LEGAL} on 法务/合同.md, inherited"]
    assert file_access(sd(), "x").nobody


def test_narrowing_names_the_allows_cut_short() -> None:
    access = file_access(sd(allow(ALICE), deny(INTERN), allow(LEGAL)), "a.md", KNOWN)
    assert not access.exact
    assert access.narrowed == (ALICE,)


# ---- against a plain reference of Windows' access check (MS-DTYP 2.5.3.2) ----

_GENERIC = {
    0x80000000: 0x120089,  # GENERIC_READ → FILE_GENERIC_READ
    0x40000000: 0x120116,  # GENERIC_WRITE
    0x20000000: 0x1200A0,  # GENERIC_EXECUTE
    0x10000000: 0x1F01FF,  # GENERIC_ALL → FILE_ALL_ACCESS
}


def reference(descriptor: SecurityDescriptor, token: frozenset[str]) -> bool:
    """Windows' access check for FILE_READ_DATA over the whole mask, as MS-DTYP writes it:
    each ACE grants or denies the bits still wanted; conditional allows are not satisfied,
    conditional denies apply."""
    if descriptor.dacl is None:
        return True
    wanted = FILE_READ_DATA
    for ace in descriptor.dacl:
        if ace.flags & INHERIT_ONLY_ACE:
            continue
        mask = ace.mask
        for bit, mapped in _GENERIC.items():
            if mask & bit:
                mask |= mapped
        sid = descriptor.owner if ace.sid == "S-1-3-4" else ace.sid
        if sid not in token:
            continue
        if ace.type == 0x00:
            wanted &= ~mask
        elif ace.type in (0x01, 0x06, 0x0A, 0x0C) and mask & wanted:
            return False
        if not wanted:
            return True
    return False


SIDS = [LEGAL, HR, ALICE, INTERN, ADMINS, OWNER, "S-1-3-0", "S-1-3-4", *sorted(EVERY_PERSON)]
MASKS = [READ, FILE_READ_DATA, GENERIC_READ, GENERIC_ALL, WRITE_ONLY, 0x20000000, 0x40000000]
aces = st.builds(
    Ace,
    st.sampled_from([0x00, 0x00, 0x01, 0x01, 0x09, 0x0A, 0x02]),
    st.sampled_from([0, INHERITED_ACE, INHERIT_ONLY_ACE, 0x03]),
    st.sampled_from(MASKS),
    st.sampled_from(SIDS),
)
descriptors = st.one_of(
    st.just(SecurityDescriptor(OWNER, None, None)),
    st.builds(lambda a: SecurityDescriptor(OWNER, None, tuple(a)), st.lists(aces, max_size=8)),
)
real_sids = st.frozensets(st.sampled_from([LEGAL, HR, ALICE, INTERN, ADMINS, OWNER]))


@given(descriptors, real_sids, st.booleans())
@settings(max_examples=1500, deadline=None)
def test_never_wider_than_windows_and_exact_when_it_says_so(
    descriptor: SecurityDescriptor, sids: frozenset[str], is_person: bool
) -> None:
    """For any DACL and any caller (a person, whose token holds every well-known person SID,
    or a caller without them): the index shows the file only where Windows lets the caller
    read it, and for a person exactly there when it says it is exact."""
    real = sids | EVERY_PERSON if is_person else sids
    folded = sids | {EVERYONE} if is_person else sids
    access = file_access(descriptor, "x", KNOWN)
    windows = reference(descriptor, real)
    assert may_read(descriptor, folded) is windows
    shown = visible(access, folded)
    assert not shown or windows, "wider than Windows"
    if access.exact and is_person:
        assert shown is windows


def test_a_deny_naming_a_sid_no_sync_read_refuses_every_person() -> None:
    """BUILTIN\\Users is in every person's Windows token but not in their roles when the sync
    did not read CN=Builtin: its deny must not refuse no one (Windows refuses them all)."""
    descriptor = sd(deny(BUILTIN_USERS), allow(EVERYONE))
    token = person(LEGAL, BUILTIN_USERS)  # (what Windows holds)
    roles = person(LEGAL)  # (what the directory sync gave: no BUILTIN\Users)
    assert may_read(descriptor, token) is False
    access = file_access(descriptor, "公告/内置.md", KNOWN)
    assert not visible(access, roles)
    assert access.unknown == (BUILTIN_USERS,) and not access.exact
    assert access.deny == (EVERYONE,) and access.allow == (EVERYONE,)  # (kept: re-stamped later)
    # Once the sync reads it, the deny is exact: its holders refused, nobody else.
    read = file_access(descriptor, "公告/内置.md", KNOWN | {BUILTIN_USERS})
    assert read.exact and read.deny == (BUILTIN_USERS,) and visible(read, roles)
    # A deny after the last allow decides nothing, known or not; an allow of an unknown SID
    # grants no one here (narrower), never a refusal of everyone.
    assert file_access(sd(allow(LEGAL), deny(BUILTIN_USERS)), "x", KNOWN).exact
    assert file_access(sd(allow(BUILTIN_USERS), allow(LEGAL)), "x", KNOWN).exact
    # No directory at all: every deny naming a SID that is not well-known refuses everyone.
    assert file_access(sd(deny(INTERN), allow(LEGAL)), "x").unknown == (INTERN,)
    assert file_access(sd(deny("S-1-1-0"), allow(LEGAL)), "x").unknown == ()


@given(descriptors, real_sids, st.frozensets(st.sampled_from(sorted(KNOWN))))
@settings(max_examples=1500, deadline=None)
def test_never_wider_when_the_directory_knows_only_some_sids(
    descriptor: SecurityDescriptor, sids: frozenset[str], known: frozenset[str]
) -> None:
    """A person's Windows token holds SIDs the directory sync never read (builtin groups,
    groups outside its search, other domains); their roles hold only those it read. Whatever
    the DACL, the index never shows them more than Windows lets them read."""
    windows = reference(descriptor, sids | EVERY_PERSON)
    roles = (sids & known) | {EVERYONE}
    assert not visible(file_access(descriptor, "x", known), roles) or windows, "wider"


@given(descriptors)
def test_bytes_round_trip(descriptor: SecurityDescriptor) -> None:
    parsed = parse_security_descriptor(security_descriptor_bytes(descriptor))
    assert (parsed.owner, parsed.group, parsed.dacl) == (
        descriptor.owner,
        descriptor.group,
        descriptor.dacl,
    )


@given(descriptors, st.data())
def test_malformed_bytes_are_refused_never_guessed(
    descriptor: SecurityDescriptor, data: st.DataObject
) -> None:
    """A truncated or scribbled descriptor is a SecurityDescriptorError or parses to some
    descriptor; it never raises anything else."""
    raw = bytearray(security_descriptor_bytes(descriptor))
    cut = data.draw(st.integers(0, len(raw)))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] = data.draw(st.integers(0, 255))
    for blob in (bytes(raw[:cut]), bytes(raw)):
        try:
            parse_security_descriptor(blob)
        except SecurityDescriptorError:
            pass


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x01\x00\x04\x80" + b"\x00" * 12 + b"\xff\x00\x00\x00",  # DACL past the end
        b"\x02\x00\x04\x80" + b"\x00" * 16,  # revision 2
        b"\x01\x00\x04\x00" + b"\x00" * 16,  # not self-relative
    ],
)
def test_malformed_descriptors(blob: bytes) -> None:
    with pytest.raises(SecurityDescriptorError):
        parse_security_descriptor(blob)


@pytest.mark.parametrize(
    ("revision", "valid"), [(1, False), (2, True), (3, True), (4, True), (5, False)]
)
def test_acl_revisions_windows_accepts_are_read(revision: int, valid: bool) -> None:
    """ACL revisions 2–4 are valid (Samba's smbcacls writes 3: a DACL set the way Explorer
    sets it on a Samba share was read as malformed, the file withdrawn); others are not."""
    blob = bytearray(security_descriptor_bytes(SecurityDescriptor(None, None, (allow(LEGAL),))))
    dacl_at = struct.unpack_from("<I", blob, 16)[0]
    blob[dacl_at] = revision
    if valid:
        assert parse_security_descriptor(bytes(blob)).dacl == (allow(LEGAL),)
    else:
        with pytest.raises(SecurityDescriptorError, match="revision"):
            parse_security_descriptor(bytes(blob))


def test_a_dacl_flag_without_a_dacl_is_null_and_a_present_empty_one_is_empty() -> None:
    null = parse_security_descriptor(b"\x01\x00\x04\x80" + b"\x00" * 16)
    assert null.dacl is None
    empty = security_descriptor_bytes(SecurityDescriptor(None, None, ()))
    assert parse_security_descriptor(empty).dacl == ()
