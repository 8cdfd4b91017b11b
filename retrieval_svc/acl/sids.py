"""Windows security identifiers (SIDs) as roles: one spelling for the directory sync (a
person's SIDs) and the share reader (a file's DACL), so the two meet in the same intersection
as every other role (design.md §4, §16).

A SID role is ``sid:`` followed by the SID's string form (``sid:S-1-5-21-…-1104``), upper-case
``S``, decimal parts. Only the directory (``sync-ldap`` against Active Directory) gives SID
roles to people, and only a DACL puts them on documents: no caller, token or key may assert
one (``reserved_role``), or asserting ``sid:S-1-1-0`` would read what Everyone may, and
asserting a group's SID would act as its members.

The well-known SIDs ``S-1-1-0`` (Everyone) and ``S-1-5-11`` (Authenticated Users) are held by
every person the tenant knows — a principal whose user id resolves to someone — never by an
anonymous caller or an id that names no one (``PERSON_ROLES``).
"""

from __future__ import annotations

import re

from retrieval_svc.key_entry import SID_PREFIX

EVERYONE = "S-1-1-0"
AUTHENTICATED_USERS = "S-1-5-11"
CREATOR_OWNER = "S-1-3-0"
_SID = re.compile(r"^S-1-([0-9]{1,15})((?:-[0-9]{1,10}){0,15})$")  # (ASCII digits only)
_MAX_SUB = 0xFFFFFFFF
_MAX_AUTHORITY = 0xFFFFFFFFFFFF


def parse_sid(text: str) -> str | None:
    """``text`` as a SID's canonical string (``s-1-5-11`` → ``S-1-5-11``), or None when it is
    not one (MS-DTYP 2.4.2.1: revision 1, an authority below 2^48, at most 15 sub-authorities
    below 2^32)."""
    match = _SID.match(text.strip().upper())
    if match is None or int(match[1]) > _MAX_AUTHORITY:
        return None
    subs = [int(s) for s in match[2].split("-")[1:]]
    if any(s > _MAX_SUB for s in subs):
        return None
    return "-".join(["S-1", str(int(match[1])), *(str(s) for s in subs)])


def sid_from_bytes(raw: bytes) -> str:
    """A binary SID (``objectSid``; MS-DTYP 2.4.2.2) as its string form; ValueError if
    ``raw`` is not one."""
    if len(raw) < 8 or raw[0] != 1:
        raise ValueError("not a SID: too short or not revision 1")
    count = raw[1]
    if count > 15 or len(raw) != 8 + 4 * count:
        raise ValueError(f"not a SID: {count} sub-authorities in {len(raw)} bytes")
    authority = int.from_bytes(raw[2:8], "big")
    subs = [int.from_bytes(raw[8 + 4 * i : 12 + 4 * i], "little") for i in range(count)]
    return "-".join(["S-1", str(authority), *(str(s) for s in subs)])


def sid_to_bytes(sid: str) -> bytes:
    """A SID's string form as its binary form (for LDAP filters such as ``<SID=…>``)."""
    canonical = parse_sid(sid)
    if canonical is None:
        raise ValueError(f"{sid!r} is not a SID")
    _, _, authority, *subs = canonical.split("-")
    return (
        bytes([1, len(subs)])
        + int(authority).to_bytes(6, "big")
        + b"".join(int(s).to_bytes(4, "little") for s in subs)
    )


def domain_part(sid: str) -> str:
    """The SID without its last part (a domain account's RID): the domain's SID."""
    return sid.rsplit("-", 1)[0]


def with_rid(domain_sid: str, rid: int | str) -> str:
    """The SID of relative id ``rid`` in the domain ``domain_sid`` (a primary group's SID from
    a user's ``primaryGroupID``)."""
    return f"{domain_sid}-{int(rid)}"


def sid_role(sid: str) -> str:
    """The role that stands for ``sid`` (``sid:S-…``); ValueError if it is not a SID."""
    canonical = parse_sid(sid)
    if canonical is None:
        raise ValueError(f"{sid!r} is not a SID")
    return SID_PREFIX + canonical


def role_sid(role: str) -> str | None:
    """The SID a role stands for, or None when it is not a SID role."""
    if not role.startswith(SID_PREFIX):
        return None
    return parse_sid(role.removeprefix(SID_PREFIX))


# Held by every person the tenant knows (Windows gives both to every authenticated user).
PERSON_ROLES = frozenset({SID_PREFIX + EVERYONE, SID_PREFIX + AUTHENTICATED_USERS})
