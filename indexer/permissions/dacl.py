"""Who may read a file's data, decided from its own DACL as Windows decides it, and put in the
index's terms (pure: no I/O).

Windows' access check for one right (``FILE_READ_DATA``) walks the DACL in its stored order —
canonical or not, inherited ACEs where they are stored — skipping inherit-only ACEs and ACEs
for SIDs the caller's token does not hold; the first ACE left whose (generic-mapped) mask
holds the right decides: an allow grants, a deny refuses. No ACE: refused. A NULL DACL grants
everyone; an empty one no one. ``may_read`` is that check for one token.

The index cannot walk an ordered list per request: a chunk is visible to a principal holding
any role of ``access_roles`` and none of ``access_denied`` (``retrieval_svc.acl.rule``). So
``file_access`` turns a DACL into those two sets:

* every allow that grants reading → its SID in ``allow``; every deny that comes before some
  such allow → its SID in ``deny`` (a deny after the last allow never decides anything);
* this is exact when no deny stands between two allows (all denies first — the canonical
  order of a file with explicit denies — or no deny at all). Otherwise — an allow before a
  deny that a later allow sits behind, as in an explicit allow followed by an inherited deny,
  or a non-canonical DACL — a person holding an early allow's SID and a later deny's SID is
  refused here where Windows lets them read: narrower, never wider. ``exact`` is then False
  and ``narrowed`` names the allows this can cut short; the run counts it and *why not*
  says it;
* an allow whose SID a deny before it already names grants no one and is dropped;
* a deny whose SID the directory does not know the holders of (``known``: the SIDs the
  tenant's directory sync read, ``retrieval_svc.acl.known_sids`` — not ``BUILTIN\\Users``
  when ``CN=Builtin`` was not read, a group outside the sync's search, the file server's own
  local groups, another domain's) refuses every person here (``EVERYONE`` in ``deny``):
  Windows refuses whoever holds it, and who that is cannot be told, so the index fails closed.
  ``unknown`` names such SIDs; the file is then not ``exact``. When the directory later reads
  the SID, the next listing judges the file again (its roles' version changes).

Well-known SIDs mean what Windows means: ``Everyone``, ``Authenticated Users``, ``NETWORK``
and ``This Organization`` are in every SMB caller's token, so each is the one role every
person the tenant knows holds (``EVERYONE``); ``CREATOR OWNER``/``CREATOR GROUP`` are never in
a token (they only shape what children inherit); ``OWNER RIGHTS`` is the file's owner;
``BUILTIN\\Administrators`` and every other SID is a role like any other. Callback and object
allows (conditional ACEs) never grant here; their denies always deny: narrower, never wider.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable
from dataclasses import dataclass

from indexer.permissions.security_descriptor import Ace, SecurityDescriptor
from retrieval_svc.acl.sids import sid_role

FILE_READ_DATA = 0x0001
GENERIC_ALL = 0x10000000
GENERIC_READ = 0x80000000
# (GENERIC_WRITE and GENERIC_EXECUTE map to rights without FILE_READ_DATA: MS-SMB2's
# FILE_GENERIC_WRITE / FILE_GENERIC_EXECUTE.)
READS = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL

ALLOWED, DENIED = 0x00, 0x01
_ALLOW_LIKE = frozenset({0x05, 0x09, 0x0B})  # object / callback allows: never grant here
_DENY_LIKE = frozenset({0x06, 0x0A, 0x0C})  # object / callback denies: always deny here

EVERYONE = "S-1-1-0"
# In every token an SMB session gets for a person: Everyone, Authenticated Users, NETWORK,
# This Organization.
EVERY_PERSON = frozenset({EVERYONE, "S-1-5-11", "S-1-5-2", "S-1-5-15"})
NO_ONE = frozenset({"S-1-3-0", "S-1-3-1"})  # CREATOR OWNER, CREATOR GROUP
OWNER_RIGHTS = "S-1-3-4"

WELL_KNOWN = {
    EVERYONE: "Everyone",
    "S-1-5-11": "Authenticated Users",
    "S-1-5-2": "NETWORK",
    "S-1-5-15": "This Organization",
    "S-1-3-0": "CREATOR OWNER",
    "S-1-3-1": "CREATOR GROUP",
    OWNER_RIGHTS: "OWNER RIGHTS",
    "S-1-5-18": "SYSTEM",
    "S-1-5-32-544": "BUILTIN\\Administrators",
    "S-1-5-32-545": "BUILTIN\\Users",
    "S-1-5-32-551": "BUILTIN\\Backup Operators",
}


def role_of(sid: str) -> str:
    """The role a SID stands for on a chunk (the spelling the directory sync gives people)."""
    return sid_role(sid)


def grants_read(ace: Ace) -> bool:
    """Whether the ACE's mask, generic rights mapped, holds FILE_READ_DATA."""
    return bool(ace.mask & READS)


def _is_deny(ace: Ace) -> bool:
    return ace.type == DENIED or ace.type in _DENY_LIKE


def _who(sid: str, owner: str | None) -> str | None:
    """The SID a token would hold for this ACE (``None``: no token holds it)."""
    if sid in NO_ONE:
        return None
    if sid == OWNER_RIGHTS:
        return owner
    return EVERYONE if sid in EVERY_PERSON else sid


def _relevant(sd: SecurityDescriptor) -> Iterable[tuple[Ace, str]]:
    """The ACEs that take part in a check for reading, with the SID a token holds for each."""
    for ace in sd.dacl or ():
        if ace.inherit_only or not grants_read(ace):
            continue
        if ace.type != ALLOWED and not _is_deny(ace):
            continue  # (an allow we cannot evaluate never grants; audit ACEs never decide)
        if (who := _who(ace.sid, sd.owner)) is not None:
            yield ace, who


def may_read(sd: SecurityDescriptor, token: Collection[str]) -> bool:
    """Whether a caller whose token holds ``token`` (SIDs, every person's well-known ones
    folded into ``EVERYONE``) may read the file's data."""
    if sd.dacl is None:
        return True
    for ace, who in _relevant(sd):
        if who in token:
            return not _is_deny(ace)
    return False


@dataclass(frozen=True, slots=True)
class Decider:
    """An ACE as *why not* names it: allow or deny, its SID, where it sits, inherited or not."""

    kind: str  # allow | deny
    sid: str
    inherited: bool
    where: str  # the file (or share) it sits on

    def shown(self) -> str:
        """``allow S-1-… (Everyone) on 法务/合同.md, inherited``."""
        name = WELL_KNOWN.get(self.sid)
        text = f"{self.kind} {self.sid}" + (f" ({name})" if name else "")
        return f"{text} on {self.where}" + (", inherited" if self.inherited else "")


@dataclass(frozen=True, slots=True)
class FileAccess:
    """Who reads a file, in the index's terms: a holder of any ``allow`` SID (and of any
    ``also`` SID, when set: the share's ACL, ``indexer.permissions.share``) and of no ``deny``
    SID. ``exact``: the same set Windows allows; else narrower (``narrowed``: the allows a
    later deny can cut short). ``deciders``: the ACEs behind it, in order; ``share``: the
    share whose ACL was applied too ("" for none)."""

    allow: tuple[str, ...]
    deny: tuple[str, ...]
    exact: bool
    deciders: tuple[Decider, ...]
    narrowed: tuple[str, ...] = ()
    # Denies naming a SID whose holders the directory does not know: refused to every person.
    unknown: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    share: str = ""

    @property
    def nobody(self) -> bool:
        """Whether no one may read it (an empty DACL, or no allow that grants reading)."""
        return not self.allow


def file_access(
    sd: SecurityDescriptor, where: str, known: Container[str] = frozenset()
) -> FileAccess:
    """``sd``'s readers as the index holds them (see the module); ``known``: the SIDs whose
    holders the directory knows (by default none: every deny naming a SID other than a
    well-known one refuses every person)."""
    if sd.dacl is None:
        return FileAccess((EVERYONE,), (), True, (Decider("allow", EVERYONE, False, where),))
    steps = list(_relevant(sd))
    last_allow = max((i for i, (ace, _) in enumerate(steps) if not _is_deny(ace)), default=-1)
    allow: dict[str, None] = {}
    deny: dict[str, None] = {}
    deciders: list[Decider] = []
    narrowed: list[str] = []
    unknown: list[str] = []
    for ace, who in steps[: last_allow + 1]:
        decider = Decider("deny" if _is_deny(ace) else "allow", ace.sid, ace.inherited, where)
        if _is_deny(ace) and who != EVERYONE and who not in known:
            # Who holds it cannot be told here: every person is refused (fail closed). The
            # allows after it are kept, so a directory that reads it later only re-stamps.
            if who not in unknown:
                unknown.append(who)
                deciders.append(decider)
            narrowed.extend(a for a in allow if a not in narrowed)
            continue
        if _is_deny(ace):
            if who not in deny:
                deny[who] = None
                deciders.append(decider)
            # (an allow granted before this deny, with more allows after it: a holder of both
            # is refused here where Windows lets them read)
            narrowed.extend(a for a in allow if a not in narrowed)
            if who == EVERYONE:
                break  # (no allow after it grants anyone, whatever roles a principal holds)
            continue
        if who in deny or who in allow:
            continue  # (refused by a deny before it, or granted already)
        allow[who] = None
        deciders.append(decider)
    if unknown:
        deny.setdefault(EVERYONE, None)
    return FileAccess(
        tuple(allow),
        tuple(deny),
        not narrowed and not unknown,
        tuple(deciders),
        tuple(narrowed),
        tuple(unknown),
    )


def visible(access: FileAccess, token: Collection[str]) -> bool:
    """Whether the index shows the file to a holder of ``token`` (the rule the query and the
    post-check apply to ``access_roles``, ``access_also`` and ``access_denied``)."""
    return (
        not set(access.allow).isdisjoint(token)
        and (not access.also or not set(access.also).isdisjoint(token))
        and set(access.deny).isdisjoint(token)
    )
