"""A file's readers on a share: its own DACL and the share's ACL, both, as Windows applies
them (pure: no I/O).

Windows checks a file opened through a share twice — the share's ACL when the session
connects (what it grants is the most any handle on that share may have), the file's DACL
when it is opened — and grants only what both allow. In the index's terms (a holder of a
role of ``access_roles``, of a role of ``access_also`` when it is set, and of no role of
``access_denied``) that is:

* the denies of both lists together (a share deny refuses on every file of the share);
* one allow list where one of them contains the other — the share allows ``Everyone`` (its
  default, and a share with no ACL at all), the file allows ``Everyone``, or every SID of one
  is in the other: the narrower list, exactly. (``Everyone`` contains every SID: only a person
  the tenant knows holds ``sid:`` roles — the directory gives them, no caller may assert one,
  ``retrieval_svc.acl.sids`` — and every such person holds Everyone's.)
* otherwise both lists, each of which must hold: the file's allows in ``access_roles`` and
  the share's in ``access_also`` (``FileAccess.also``), exactly.

When a rules file, sidecar, front matter or manifest narrows such a document too, the index
has two lists for three: ``indexer.documents`` then keeps only the SIDs both the file and the
share name (narrower than Windows for a person holding one SID of each that differ; never
wider), marks the document ``access_narrowed`` and names it in *why not*.

Who decided is kept: the share's ACEs are ``Decider``s whose place is ``share NAME``.
"""

from __future__ import annotations

from collections.abc import Container

from indexer.permissions.dacl import EVERYONE, FileAccess, file_access
from indexer.permissions.security_descriptor import parse_security_descriptor


def share_place(share: str) -> str:
    """How *why not* names a share's ACL: ``share 部门资料``."""
    return f"share {share}"


def share_access(
    descriptor: bytes | None, share: str, known: Container[str] = frozenset()
) -> FileAccess | None:
    """Who the share's ACL lets read files on it; None where it narrows nothing (no ACL set:
    Windows lets everyone through, as an ``Everyone`` full-control ACL does). ``known``: the
    SIDs whose holders the directory knows (a share deny naming another refuses every person,
    as a file's does: ``indexer.permissions.dacl``). Raises SecurityDescriptorError when the
    descriptor cannot be parsed."""
    if not descriptor:
        return None
    access = file_access(parse_security_descriptor(descriptor), share_place(share), known)
    if access.allow == (EVERYONE,) and not access.deny:
        return None
    return access


def _unique(*lists: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for items in lists for s in items))


def with_share(file: FileAccess, share: FileAccess | None, name: str) -> FileAccess:
    """``file``'s readers, also through the share ``name``'s ACL ``share`` (see the module)."""
    if share is None:
        return file
    allow: tuple[str, ...] = file.allow
    also: tuple[str, ...] = ()
    theirs, ours = set(share.allow), set(file.allow)
    if not share.allow:
        allow = ()  # (the share lets no one in: no one reads it)
    elif EVERYONE in theirs:
        allow = file.allow
    elif EVERYONE in ours or theirs <= ours:
        allow = share.allow
    elif not ours <= theirs:
        also = share.allow
    return FileAccess(
        allow=allow,
        deny=_unique(file.deny, share.deny),
        exact=file.exact and share.exact,
        deciders=file.deciders + share.deciders,
        narrowed=_unique(file.narrowed, share.narrowed),
        unknown=_unique(file.unknown, share.unknown),
        also=also,
        share=name,
    )
