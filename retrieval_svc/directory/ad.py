"""Active Directory's own shapes, read by ``sync-ldap`` when the server is AD (``ad: true``, or
detected from the root DSE): every user's and group's ``objectSid``, primary groups
(``primaryGroupID``, which no group's ``member`` lists), ranged attributes read to the end
(``member;range=0-1499`` …), disabled and expired accounts dropped (``userAccountControl`` bit
0x2; ``accountExpires`` past, judged at each sync: an expiry changes no ``uSNChanged``),
foreign security principals followed where they can be, and ``--every`` reading only what
changed (``uSNChanged``) where the answer can be proven complete.

What it reads becomes a ``Directory`` like any other (``groups.py`` decides the grants), with
each entry's SID beside it: a person holds ``sid:<their SID>`` and ``sid:<SID>`` of every group
they are in, transitively, their primary group included (``retrieval_svc.acl.sids``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from retrieval_svc.acl.known_sids import EVERY_PERSON, NEVER_A_PERSON
from retrieval_svc.acl.sids import (
    domain_part,
    parse_sid,
    sid_from_bytes,
    with_rid,
)
from retrieval_svc.directory.ad_wire import ranged
from retrieval_svc.directory.groups import Directory, normal_dn
from retrieval_svc.directory.sync_file import LdapSync

SHOW_DELETED = "1.2.840.113556.1.4.417"  # LDAP_SERVER_SHOW_DELETED_OID
# LDAP_SERVER_DOMAIN_SCOPE_OID: no continuation references to the forest's other partitions
# (Configuration, the DNS zones) below a search from the domain's root.
DOMAIN_SCOPE = [("1.2.840.113556.1.4.1339", False, None)]
ACCOUNT_DISABLE = 0x2
# ``accountExpires``: 100-ns intervals since 1601-01-01 UTC; 0 and 2^63-1 mean never.
_NEVER_EXPIRES = (0, 0x7FFFFFFFFFFFFFFF)
_FILETIME_UNIX_S = 11_644_473_600
# Every person's SMB session holds these (Everyone, Authenticated Users, NETWORK, This
# Organization); a group holding one is held by every person.
_EVERY_PERSON = EVERY_PERSON
# No person's SMB session holds these (INTERACTIVE, BATCH, SERVICE…, ANONYMOUS LOGON): a group
# holds nobody more through one. Any other principal this read cannot resolve (another
# domain's person or group, a well-known SID not named here) may be in a token that holds the
# group: who holds the group cannot be told, so its SID is not known (``_partial``).
_NO_PERSON = NEVER_A_PERSON | {"S-1-5-7"}
# A delta older than this reads whole: deleted objects outlive it on every domain
# (tombstoneLifetime is at least two days), so a deletion is never missed.
MAX_DELTA_AGE_S = 86_400.0
# Tests set it to ask for members this many at a time, as a Windows DC answers past its
# MaxValRange (1,500): the range reader then runs against a real server.
RANGE_STEP: int | None = None


@dataclass(slots=True)
class AdGroup:
    dn: str
    name: str
    sid: str | None
    members: list[str]


@dataclass(slots=True)
class AdUser:
    dn: str
    uid: str
    sid: str | None
    primary: int | None
    disabled: bool
    aliases: dict[str, list[str]]
    expires: float | None = None  # (when the account expires, Unix seconds; None: never)

    def refused(self, now: float) -> bool:
        """Whether Windows refuses this account a logon at ``now``: disabled, or expired."""
        return self.disabled or (self.expires is not None and self.expires <= now)


@dataclass(slots=True)
class AdReplica:
    """What ``--every`` keeps between syncs of an AD: every group and user by objectGUID, and
    the server's ``highestCommittedUSN`` read just before they were (a change made during the
    read is seen again next time)."""

    usn: int | None = None
    server: str = ""
    at: float = 0.0
    searches: tuple[str, ...] = ()
    groups: dict[bytes, AdGroup] = field(default_factory=dict)
    users: dict[bytes, AdUser] = field(default_factory=dict)


def attributes(
    name_attribute: str, id_attribute: str, aliases: Iterable[str]
) -> tuple[list[str], list[str]]:
    """What is read of each group and of each user in AD."""
    member = "member" if RANGE_STEP is None else f"member;range=0-{RANGE_STEP - 1}"
    groups = [name_attribute, member, "objectSid", "objectGUID"]
    users = [id_attribute, *aliases, "objectSid", "objectGUID", "primaryGroupID",
             "userAccountControl", "accountExpires"]  # fmt: skip
    return groups, users


def _text(entry: dict[str, Any], attribute: str) -> list[str]:
    raw = entry.get("raw_attributes", {}).get(attribute, [])
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]


def _sid(entry: dict[str, Any]) -> str | None:
    raw = entry.get("raw_attributes", {}).get("objectSid") or []
    try:
        return sid_from_bytes(raw[0]) if raw else None
    except ValueError:
        return None


def _guid(entry: dict[str, Any]) -> bytes:
    raw = entry.get("raw_attributes", {}).get("objectGUID") or [b""]
    return bytes(raw[0]) if raw[0] else normal_dn(entry["dn"]).encode()


def group_of(conn: Any, entry: dict[str, Any], name_attribute: str) -> AdGroup:
    members = [m.decode("utf-8", "replace") for m in ranged(conn, entry, "member")]
    (name, *_) = [*_text(entry, name_attribute), ""]
    return AdGroup(entry["dn"], name, _sid(entry), members)


def user_of(entry: dict[str, Any], id_attribute: str, aliases: Iterable[str]) -> AdUser:
    (uid, *_) = [*_text(entry, id_attribute), ""]
    (primary, *_) = [*_text(entry, "primaryGroupID"), ""]
    (control, *_) = [*_text(entry, "userAccountControl"), "0"]
    disabled = bool(int(control) & ACCOUNT_DISABLE) if control.lstrip("-").isdigit() else False
    (expiry, *_) = [*_text(entry, "accountExpires"), "0"]
    ticks = int(expiry) if expiry.lstrip("-").isdigit() else 0
    return AdUser(
        entry["dn"],
        uid,
        _sid(entry),
        int(primary) if primary.isdigit() else None,
        disabled,
        {a: _text(entry, a) for a in aliases},
        None if ticks in _NEVER_EXPIRES else ticks / 10_000_000 - _FILETIME_UNIX_S,
    )


def build(
    groups: Iterable[AdGroup],
    users: Iterable[AdUser],
    now: float | None = None,
    sid_only: Iterable[str] = (),
) -> Directory:
    """The directory these entries say at ``now`` (None: the clock): disabled and expired
    accounts left out (counted as disabled), each person in
    their primary group, and the members a foreign security principal stands for — every
    person for Everyone and Authenticated Users, the entry of this directory that holds the
    SID otherwise; one nobody here holds is named in ``foreign`` and gives nothing."""
    directory = Directory()
    bases = tuple(normal_dn(b) for b in sid_only)
    by_sid: dict[str, str] = {}
    for group in groups:
        dn = normal_dn(group.dn)
        if bases and dn.endswith(bases):
            directory.sid_only.add(dn)
        if group.name:
            directory.groups[dn] = group.name
        if group.sid:
            directory.sids[dn] = group.sid
            by_sid[group.sid] = dn
        for member in group.members:
            directory.add_member(member, dn)
    people: list[str] = []
    for user in users:
        if not user.uid:
            continue
        if user.refused(time.time() if now is None else now):
            directory.disabled += 1
            if user.sid:  # (known: its holder is no one here)
                directory.unheld_sids.add(user.sid)
            directory.refused[normal_dn(user.dn)] = (user.uid, user.aliases)
            continue
        dn = normal_dn(user.dn)
        directory.users[dn] = user.uid
        people.append(dn)
        if any(user.aliases.values()):
            directory.aliases[dn] = user.aliases
        if user.sid:
            directory.sids[dn] = user.sid
            by_sid[user.sid] = dn
            primary = user.primary is not None and by_sid.get(
                with_rid(domain_part(user.sid), user.primary)
            )
            if primary:  # (no group's member attribute lists it)
                directory.add_member(dn, primary)
    unresolved: set[str] = set()
    for member in [m for m in directory.parents if _foreign(m)]:
        sid = parse_sid(member.split(",", 1)[0].split("=", 1)[1])
        held = directory.parents.pop(member)
        if sid in _EVERY_PERSON:
            for person in people:
                directory.parents.setdefault(person, set()).update(held)
        elif sid is not None and (known := by_sid.get(sid)) is not None:
            directory.parents.setdefault(known, set()).update(held)
        elif sid not in _NO_PERSON:
            names = sorted(directory.groups.get(g, g) for g in held)
            directory.foreign[sid or member] = names
            unresolved |= held
    directory.partial_sids = _partial(directory, unresolved)
    return directory


def _partial(directory: Directory, unresolved: Iterable[str] = ()) -> set[str]:
    """The SIDs of groups whose member list names an entry this read does not hold (a group
    or a person outside the searches, or a foreign principal it cannot resolve: ``unresolved``
    holds those groups), and of every group holding one of them: who is in them through that
    entry cannot be told."""
    read = directory.users.keys() | directory.groups.keys() | directory.refused.keys()
    partial = {g for member, held in directory.parents.items() if member not in read for g in held}
    partial |= set(unresolved)
    todo = list(partial)
    while todo:
        for parent in directory.parents.get(todo.pop(), ()):
            if parent not in partial:
                partial.add(parent)
                todo.append(parent)
    return {directory.sids[g] for g in partial if g in directory.sids}


def _foreign(dn: str) -> bool:
    return ",cn=foreignsecurityprincipals," in dn


def delta(
    conn: Any,
    entries: Any,
    searches: tuple[tuple[tuple[str, ...], str, list[str]], tuple[str, str, list[str]]],
    naming_context: str,
    replica: AdReplica,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | str:
    """The groups and users changed since ``replica.usn``, or why that answer could not be
    proven complete (then the caller reads whole): an entry deleted, renamed, moved out of
    the search or no longer matching its filter since (its old DN could name a new person:
    only a whole read is exact), the Deleted Objects container unreadable, or a replica
    older than ``MAX_DELTA_AGE_S``."""
    import ldap3

    if replica.usn is None:
        return "no earlier read"
    if time.time() - replica.at > MAX_DELTA_AGE_S:
        return "the last read is more than a day old"
    since = replica.usn + 1
    (g_bases, g_filter, g_attrs), (u_base, u_filter, u_attrs) = searches
    changed = (
        [
            e
            for base in g_bases
            for e in entries(conn, base, f"(&{g_filter}(uSNChanged>={since}))", g_attrs)
        ],
        list(entries(conn, u_base, f"(&{u_filter}(uSNChanged>={since}))", u_attrs)),
    )
    known = {**{k: v.dn for k, v in replica.groups.items()},
             **{k: v.dn for k, v in replica.users.items()}}  # fmt: skip
    seen: set[bytes] = set()
    for entry in (*changed[0], *changed[1]):
        guid = _guid(entry)
        seen.add(guid)
        if guid in known and normal_dn(known[guid]) != normal_dn(entry["dn"]):
            return f"{known[guid]} was renamed or moved"
    try:
        conn.search(naming_context, f"(&(isDeleted=TRUE)(uSNChanged>={since}))",
                    ldap3.SUBTREE, attributes=["objectGUID"],
                    controls=[(SHOW_DELETED, True, None), *DOMAIN_SCOPE])  # fmt: skip
    except Exception as exc:
        return f"the Deleted Objects container cannot be read ({type(exc).__name__})"
    gone = [_guid(e) for e in conn.response or [] if e.get("type") == "searchResEntry"]
    if n := sum(g in known for g in gone):
        return f"{n} entries were deleted"
    others = _guids(entries(conn, naming_context, f"(uSNChanged>={since})", ["objectGUID"]))
    if n := sum(g in known and g not in seen for g in others):
        return f"{n} entries left the search or no longer match its filter"
    return changed


def _guids(found: Iterator[dict[str, Any]]) -> set[bytes]:
    return {_guid(e) for e in found}


def read(
    conn: Any,
    entries: Any,
    sync: LdapSync,
    root: dict[str, Any],
    replica: AdReplica | None,
) -> tuple[Directory, int | None, str]:
    """The directory; how many entries were read because they changed (None: read whole);
    and why it was read whole where a ``replica`` was kept (empty otherwise)."""
    groups, users = sync.groups, sync.users
    g_attrs, u_attrs = attributes(groups.name_attribute, users.id_attribute, users.aliases)
    usn_value = root.get("highestCommittedUSN")
    usn_text = str(usn_value[0] if isinstance(usn_value, list) else usn_value or "")
    usn = int(usn_text) if usn_text.isdigit() else None
    server = str(root.get("dsServiceName") or "")
    context = root.get("defaultNamingContext") or groups.base
    context = str(context[0] if isinstance(context, list) else context)
    builtin = builtin_base(context, groups.base) if groups.builtin else None
    g_bases = (groups.base, *([builtin] if builtin else []))
    searches = ((g_bases, groups.filter, g_attrs), (users.base, users.filter, u_attrs))
    key = (sync.url, *g_bases, groups.filter, *g_attrs, "", users.base, users.filter, *u_attrs)
    sid_only = [builtin] if builtin else []
    why = ""
    if replica is not None:
        if replica.searches != key or replica.server != server:
            replica.usn = None  # (another search or another DC: its USNs mean nothing here)
        found = "the server gives no highestCommittedUSN" if usn is None else (
            delta(conn, entries, searches, context, replica)
        )  # fmt: skip
        if not isinstance(found, str):
            for entry in found[0]:
                replica.groups[_guid(entry)] = group_of(conn, entry, groups.name_attribute)
            for entry in found[1]:
                replica.users[_guid(entry)] = user_of(entry, users.id_attribute, users.aliases)
            replica.usn, replica.at = usn, time.time()
            built = build(replica.groups.values(), replica.users.values(), None, sid_only)
            return built, len(found[0]) + len(found[1]), ""
        why = found
    read_groups = {
        _guid(e): group_of(conn, e, groups.name_attribute)
        for base in g_bases
        for e in entries(conn, base, groups.filter, g_attrs)
    }
    read_users = {
        _guid(e): user_of(e, users.id_attribute, users.aliases)
        for e in entries(conn, users.base, users.filter, u_attrs)
    }
    if replica is not None:
        replica.groups, replica.users = read_groups, read_users
        replica.usn, replica.at, replica.server, replica.searches = usn, time.time(), server, key
    return build(read_groups.values(), read_users.values(), None, sid_only), None, why


def builtin_base(naming_context: str, groups_base: str) -> str | None:
    """``CN=Builtin`` of the domain, read beside ``groups.base`` for the builtin groups' SIDs
    (BUILTIN\\Users, BUILTIN\\Administrators…); None where ``groups.base`` already holds it."""
    builtin = f"CN=Builtin,{naming_context}"
    if normal_dn(builtin).endswith(normal_dn(groups_base)):
        return None
    return builtin
