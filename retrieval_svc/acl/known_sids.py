"""Which SIDs a tenant's directory knows the holders of: the set a share's deny entries are
judged against.

A deny entry of a file's DACL refuses everyone whose Windows token holds its SID. The index
can only refuse people whose roles hold that SID, and people's SID roles come from the
directory sync: a SID the sync never read (``BUILTIN\\Users`` when ``CN=Builtin`` is not read,
a group outside ``groups.base``, the file server's own local groups, another domain's group)
is held by nobody here, so its deny would refuse nobody — wider than Windows. The indexer
therefore asks ``known_sids`` which SIDs the sync read, and a deny naming any other one refuses
every person (``indexer.permissions.dacl``).

Known means: the SID of every user and group a directory sync of the tenant read at its last
run (disabled and expired accounts included: their holders are known — nobody) — except a
group whose members the sync could not all read (its member list names an entry outside the
sync's searches, or a group that does: who holds it through that entry cannot be told) —
recorded in the sync's row of every SID it read (``directory_sids.known_in``; a policy an
earlier version synced kept them, until its next sync, as owned ``sid:`` roles with owned
``PARTIAL`` markers: ``retrieval_svc.acl.owned``, read too); the well-known SIDs every
person's SMB session holds (Everyone, Authenticated Users, NETWORK, This Organization: folded
into Everyone by the DACL reader); and the logon and service SIDs no person's SMB session
ever holds (``NEVER_A_PERSON``). Nothing else, so with no sync (or no policy database) every
deny naming another SID refuses every person.

This module is the one place that says where the set comes from: where the sync keeps its SIDs
may change; callers only ask ``known_sids``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from retrieval_svc.key_entry import SID_PREFIX

# In no person's token on an SMB session (a network logon): the local system and service
# accounts, and the logon-type groups of other kinds of logon (a token holds NETWORK instead).
NEVER_A_PERSON = frozenset({
    "S-1-5-18",  # SYSTEM
    "S-1-5-19",  # LOCAL SERVICE
    "S-1-5-20",  # NETWORK SERVICE
    "S-1-5-3",  # BATCH
    "S-1-5-4",  # INTERACTIVE
    "S-1-5-6",  # SERVICE
    "S-1-5-14",  # REMOTE INTERACTIVE LOGON
})  # fmt: skip
# Held by every person's SMB session: the DACL reader folds them into Everyone.
EVERY_PERSON = frozenset({"S-1-1-0", "S-1-5-11", "S-1-5-2", "S-1-5-15"})


@dataclass(frozen=True, slots=True)
class KnownSids:
    """The SIDs whose holders the tenant's directory knows (``synced``: what its syncs read;
    ``where``: where that was read from, for the run's summary)."""

    synced: frozenset[str]
    where: str = ""

    def __contains__(self, sid: object) -> bool:
        return sid in self.synced or sid in EVERY_PERSON or sid in NEVER_A_PERSON


NONE_KNOWN = KnownSids(frozenset(), "no directory")


# An owned marker (never a grant): the sync read this group's SID but not all its members.
PARTIAL = "sid-members-unread:"


def synced_sids(roles: Collection[str]) -> frozenset[str]:
    """The SIDs among a sync's owned roles (``sid:S-…`` → ``S-…``) whose holders it read
    whole (not marked ``PARTIAL``)."""
    partial = {r.removeprefix(PARTIAL) for r in roles if r.startswith(PARTIAL)}
    return frozenset(
        sid
        for r in roles
        if r.startswith(SID_PREFIX) and (sid := r.removeprefix(SID_PREFIX)) not in partial
    )


def known_sids(db_url: str | None, tenant: str) -> KnownSids:
    """The SIDs the tenant's directory syncs read (see the module), from the policy database
    at ``db_url``; none without one. Raises ``PolicyError`` when the database cannot be read
    (the caller must not take that for "none known" silently: it narrows, and says so)."""
    if db_url is None:
        return NONE_KNOWN
    from retrieval_svc.acl.directory_sids import known_in
    from retrieval_svc.acl.owned import owned_roles
    from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError

    try:
        engine = PolicyDatabase(DEFAULT_MODEL, db_url).engine()
        synced = known_in(engine, tenant) | synced_sids(owned_roles(engine, tenant))
    except Exception as exc:  # (SQLAlchemy's errors: the database is unreachable or unreadable)
        raise PolicyError(f"the directory's SIDs cannot be read: {type(exc).__name__}") from exc
    return KnownSids(synced, "the policy database")
