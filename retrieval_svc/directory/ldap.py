"""Reading people and groups from LDAP or Active Directory (``retrieval-svc policy sync-ldap``,
issue #35 §3).

With `ldap3 <https://ldap3.readthedocs.io>`_ (pure Python: paged searches, LDAPS and StartTLS,
no C library to build, unlike python-ldap). Every search is paged (RFC 2696) and read to its
end before anything is decided; an error anywhere — the server gone mid-page, a size or time
limit, a referral it would have to chase — raises ``DirectoryError`` and the sync changes
nothing. The bind password is read from an environment variable named in the file, never
from the file itself, and never printed.
"""

from __future__ import annotations

import contextlib
import math
import os
import ssl
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from retrieval_svc.causes import cause
from retrieval_svc.directory import ad, ad_wire
from retrieval_svc.directory.ad import AdReplica
from retrieval_svc.directory.groups import (
    BindRefused,
    Directory,
    DirectoryError,
    normal_dn,
)
from retrieval_svc.directory.sync_file import LdapSync, id_kinds
from retrieval_svc.directory.syncrepl import Replica, SyncUnavailable, refresh


def _connection(sync: LdapSync) -> Any:
    import ldap3
    from ldap3.core.exceptions import LDAPInvalidCredentialsResult

    tls = None
    if sync.url.startswith("ldaps://") or sync.start_tls:
        tls = ldap3.Tls(
            validate=ssl.CERT_REQUIRED,
            ca_certs_file=str(sync.ca_file) if sync.ca_file else None,
            version=ssl.PROTOCOL_TLS_CLIENT,
        )
    server = ldap3.Server(
        sync.url,
        use_ssl=sync.url.startswith("ldaps://"),
        tls=tls,
        connect_timeout=sync.timeout_s,
        get_info=ldap3.NONE,  # (the server's schema is not needed, nor read)
    )
    password = None
    if sync.bind_password_env:
        password = os.environ.get(sync.bind_password_env)
        if password is None:
            raise DirectoryError(f"the bind password: ${sync.bind_password_env} is not set")
    conn = ldap3.Connection(
        server,
        user=sync.bind_dn,
        password=password,
        auto_bind=ldap3.AUTO_BIND_NONE,
        raise_exceptions=True,
        receive_timeout=math.ceil(sync.timeout_s),  # (whole seconds: SO_RCVTIMEO)
        auto_referrals=False,
        auto_range=False,  # (ad_wire.ranged reads ranges itself, and fails on a partial one)
        return_empty_attributes=False,  # (with auto_range off, ldap3 trips on a range it was asked)
        read_only=True,
        check_names=False,  # (filters name AD's and OpenLDAP's classes alike)
    )
    try:
        conn.open()
        if sync.start_tls and not sync.url.startswith("ldaps://"):
            conn.start_tls()
        conn.bind()
    except LDAPInvalidCredentialsResult:
        _close(conn)
        raise BindRefused(sync.url, sync.bind_dn or "-", sync.bind_password_env or "-") from None
    except BaseException:
        _close(conn)
        raise
    return conn


def _close(conn: Any) -> None:
    """Unbind, and close the socket whatever state the connection is in (ldap3 leaves it
    open when the server refused or vanished)."""
    with contextlib.suppress(Exception):
        conn.unbind()
    sock = getattr(conn, "socket", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()


def _entries(
    conn: Any, base: str, query: str, attributes: list[str], size: int, controls: Any = None
) -> Iterator[Any]:
    """Every entry of a paged search, to its end (referrals refused: a partial answer)."""
    for item in conn.extend.standard.paged_search(
        base, query, attributes=attributes, paged_size=size, generator=True, controls=controls
    ):
        if item.get("type") == "searchResRef":
            raise DirectoryError(f"the server refers part of {base} elsewhere: a partial answer")
        if item.get("type") == "searchResEntry":
            yield item


def _values(entry: Any, attribute: str) -> list[str]:
    found = entry.get("attributes", {}).get(attribute, [])
    return [str(v) for v in (found if isinstance(found, list) else [found])]


def directory_stamp(sync: LdapSync) -> str | None:
    """What changes whenever anything in the directory does, read in one or two small
    searches: Active Directory's ``highestCommittedUSN`` (the root DSE), or OpenLDAP's
    ``contextCSN`` of the database holding the users (kept by the ``syncprov`` overlay, which
    replication needs). None where the directory has neither, or cannot be asked: then every
    sync reads the directory whole."""
    import ldap3

    try:
        conn = _connection(sync)
    except Exception:
        return None
    try:
        conn.search("", "(objectClass=*)", ldap3.BASE,
                    attributes=["highestCommittedUSN", "namingContexts"])  # fmt: skip
        root = conn.response[0].get("attributes", {}) if conn.response else {}
        if usn := root.get("highestCommittedUSN"):
            return f"usn:{usn[0] if isinstance(usn, list) else usn}"
        contexts = root.get("namingContexts") or []
        base = normal_dn(sync.users.base)
        holding = [c for c in contexts if base == normal_dn(c) or base.endswith("," + normal_dn(c))]
        for context in holding[:1]:
            conn.search(context, "(objectClass=*)", ldap3.BASE, attributes=["contextCSN"])
            found = conn.response[0].get("attributes", {}) if conn.response else {}
            if csn := found.get("contextCSN"):
                return "csn:" + ",".join(sorted(csn if isinstance(csn, list) else [csn]))
    except Exception:
        return None
    finally:
        _close(conn)
    return None


@dataclass(slots=True)
class DirectoryReplica:
    """What a sync run ``--every`` keeps between syncs to read only what changed (an RFC 4533
    refresh; ``syncrepl.py``): the groups and the users, each with the server's cookie.
    ``usable`` turns false, with the ``reason``, when the server cannot answer one; ``changed``
    is how many entries the last read brought with their attributes."""

    groups: Replica = field(default_factory=Replica)
    users: Replica = field(default_factory=Replica)
    ad: AdReplica = field(default_factory=AdReplica)  # (against Active Directory: uSNChanged)
    usable: bool = True
    reason: str = ""
    changed: int | None = None
    searches: tuple[str, ...] = ()  # (what the replica copies: another file, another replica)


def _attributes(sync: LdapSync) -> tuple[list[str], list[str]]:
    """What is read of each group and of each user."""
    member_of = sync.groups.membership == "memberOf"
    groups = [sync.groups.name_attribute, "memberOf" if member_of else "member"]
    users = [sync.users.id_attribute, *sync.users.aliases, *(["memberOf"] if member_of else [])]
    return groups, users


def _refreshed(
    conn: Any, sync: LdapSync, replica: DirectoryReplica
) -> tuple[Iterable[Any], Iterable[Any]] | None:
    """The groups' and the users' entries from a refresh of ``replica`` (which then holds
    them), or None when the server cannot give one: the caller reads whole.

    Two things a refresh cannot see, because OpenLDAP's ``memberof`` and ``refint`` overlays
    write them without a new entryCSN: the ``memberOf`` values (so a ``memberOf`` sync always
    reads whole), and the member values rewritten when a person or group is deleted or
    renamed. So when an entry is gone from where it was, the replica is read again whole —
    a group that still named the old DN would otherwise give its roles to the next person
    created under it."""
    if sync.groups.membership == "memberOf":
        replica.usable, replica.changed = False, None
        replica.reason = "memberOf is written by an overlay, unseen by syncrepl"
        return None
    group_attributes, user_attributes = _attributes(sync)
    searches = (sync.url, sync.groups.base, sync.groups.filter, *group_attributes, "",
                sync.users.base, sync.users.filter, *user_attributes)  # fmt: skip
    if replica.searches != searches:
        replica.groups, replica.users, replica.searches = Replica(), Replica(), searches
    since = replica.groups.cookie is not None and replica.users.cookie is not None
    try:
        groups, n_groups = refresh(
            conn, sync.groups.base, sync.groups.filter, group_attributes, replica.groups
        )
        users, n_users = refresh(
            conn, sync.users.base, sync.users.filter, user_attributes, replica.users
        )
    except SyncUnavailable as exc:
        replica.usable, replica.reason, replica.changed = False, str(exc)[:300], None
        return None
    if since and (_gone(replica.groups, groups) or _gone(replica.users, users)):
        replica.groups, replica.users = Replica(), Replica()  # (read again, whole)
        return _refreshed(conn, sync, replica)
    replica.groups, replica.users = groups, users
    replica.changed = n_groups + n_users if since else None  # (None: read whole)
    return groups.entries.values(), users.entries.values()


def _trusted(
    replica: DirectoryReplica,
    refreshed: tuple[Iterable[Any], Iterable[Any]],
    whole: tuple[list[Any], list[Any]],
) -> None:
    """A replica filled from scratch by a refresh, held to the paged read beside it: where
    they differ, the refresh cannot be trusted and the replica is not used again. OpenLDAP
    answers syncrepl only with entries whose entryCSN is not past the database's
    contextCSN, and ``slapadd`` without ``-w`` (a restore, a bulk load) leaves the
    contextCSN behind the entries it wrote: a refresh would then see nobody."""
    for got, read in zip(refreshed, whole, strict=True):
        seen = {normal_dn(e["dn"]) for e in got}
        missing = {normal_dn(e["dn"]) for e in read} - seen
        if missing or len(seen) != len(read):
            replica.usable, replica.changed = False, None
            replica.reason = (
                f"its syncrepl answer lacks {len(missing)} of the {len(read)} entries a search "
                "returns (a contextCSN behind the entries: loaded by slapadd without -w?)"
            )
            return


def _gone(before: Replica, after: Replica) -> bool:
    """Whether a DN ``before`` held is no longer where it was (deleted, renamed, moved out
    of the search)."""
    now = {normal_dn(e["dn"]) for e in after.entries.values()}
    return any(normal_dn(e["dn"]) not in now for e in before.entries.values())


def _read_ad(
    conn: Any, sync: LdapSync, root: dict[str, Any], replica: DirectoryReplica | None
) -> Directory:
    """Active Directory, read (``ad.py``): whole, or what changed since ``replica``'s read
    when that can be proven complete (``replica.changed``; else ``replica.reason`` says why)."""

    def entries(conn: Any, base: str, query: str, attributes: list[str]) -> Iterator[Any]:
        # (no referrals to the forest's other partitions below the domain's root: they hold
        # no people, and any referral is otherwise refused as a partial answer)
        return _entries(conn, base, query, attributes, sync.page_size, ad.DOMAIN_SCOPE)

    directory, changed, why = ad.read(conn, entries, sync, root, replica.ad if replica else None)
    directory.kinds = id_kinds(sync)
    if replica is not None:
        replica.changed, replica.reason = changed, why
    return directory


def read_directory(sync: LdapSync, replica: DirectoryReplica | None = None) -> Directory:
    """Everything the sync needs; raises DirectoryError on any failure. With a ``replica``
    that can be refreshed, only what changed since its last read comes from the server (the
    directory returned is still whole); otherwise every entry is read (paged)."""
    import ldap3.core.exceptions as errors

    directory = Directory()
    users, groups = sync.users, sync.groups
    directory.kinds = id_kinds(sync)
    member_of = groups.membership == "memberOf"
    group_attributes, user_attributes = _attributes(sync)
    try:
        conn = _connection(sync)
        try:
            root = ad_wire.root_dse(conn)
            if sync.ad or (sync.ad is None and ad_wire.is_ad(root)):
                return _read_ad(conn, sync, root, replica)
            entries = None
            if replica is not None and replica.usable:
                entries = _refreshed(conn, sync, replica)
            if entries is None or (replica is not None and replica.changed is None):
                whole = (
                    list(_entries(conn, groups.base, groups.filter, group_attributes,
                                  sync.page_size)),
                    list(_entries(conn, users.base, users.filter, user_attributes,
                                  sync.page_size)),
                )  # fmt: skip
                if entries is not None and replica is not None:
                    _trusted(replica, entries, whole)
                entries = whole
            group_entries, user_entries = entries
            for entry in group_entries:
                dn = entry["dn"]
                (name, *_) = [*_values(entry, groups.name_attribute), ""]
                if not name:
                    continue  # a group without a name gives no role by name
                directory.groups[normal_dn(dn)] = name
                if member_of:
                    for parent in _values(entry, "memberOf"):
                        directory.add_member(dn, parent)
                else:
                    for member in _values(entry, "member"):
                        directory.add_member(member, dn)
            for entry in user_entries:
                (uid, *_) = [*_values(entry, users.id_attribute), ""]
                if not uid:
                    continue  # (no id: nobody retrieval can name)
                directory.users[normal_dn(entry["dn"])] = uid
                if users.aliases:
                    directory.aliases[normal_dn(entry["dn"])] = {
                        a: _values(entry, a) for a in users.aliases
                    }
                for group in _values(entry, "memberOf") if member_of else ():
                    directory.add_member(entry["dn"], group)
        finally:
            _close(conn)
    except DirectoryError:
        raise
    except (errors.LDAPException, OSError) as exc:
        why = cause(exc) or f"{type(exc).__name__}: {exc}"
        raise DirectoryError(f"{sync.url}: {why}"[:500]) from None
    except Exception as exc:  # anything else half-way through is a partial read too
        raise DirectoryError(f"{sync.url}: {type(exc).__name__}: {exc}"[:500]) from exc
    return directory
