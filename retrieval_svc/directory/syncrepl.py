"""What changed in the directory since the last sync, without reading it whole: an RFC 4533
content-synchronisation refresh (``syncrepl`` refreshOnly), which OpenLDAP's ``syncprov``
overlay answers (issue #55 §2).

A sync that runs ``--every`` keeps a ``Replica`` of each search (the users, the groups): every
entry by its ``entryUUID``, and the server's cookie. The next refresh sends the cookie; the
server answers with the entries changed since (with their attributes), and says what is gone
either by naming it (a delete phase: ``syncprov-sessionlog``) or by naming, in compact sets of
UUIDs, what is still there (a present phase) — so an unchanged entry costs 16 bytes, not its
DN and attributes. ldap3 has no syncrepl client; the three controls and the info message are
a few ASN.1 shapes, encoded with pyasn1 (ldap3's own ASN.1 library).

Anything unexpected — the control refused (Active Directory, OpenLDAP without ``syncprov``),
a size limit, a cookie the server no longer knows — raises ``SyncUnavailable`` and the caller
reads the directory whole, as without a replica: the refresh is a speed-up, never the only
path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyasn1.codec.ber import decoder, encoder
from pyasn1.error import PyAsn1Error
from pyasn1.type import namedtype, namedval, tag, univ

SYNC_REQUEST = "1.3.6.1.4.1.4203.1.9.1.1"
SYNC_STATE = "1.3.6.1.4.1.4203.1.9.1.2"
SYNC_DONE = "1.3.6.1.4.1.4203.1.9.1.3"
SYNC_INFO = "1.3.6.1.4.1.4203.1.9.1.4"
REFRESH_REQUIRED = 4096  # e-syncRefreshRequired: the cookie is too old, start again
PRESENT, ADD, MODIFY, DELETE = 0, 1, 2, 3


class SyncUnavailable(Exception):
    """The refresh cannot be trusted or was refused; read the directory whole."""


class _Request(univ.Sequence):
    componentType = namedtype.NamedTypes(
        namedtype.NamedType(
            "mode",
            univ.Enumerated(namedValues=namedval.NamedValues(("refreshOnly", 1))),
        ),
        namedtype.OptionalNamedType("cookie", univ.OctetString()),
        namedtype.DefaultedNamedType("reloadHint", univ.Boolean(False)),
    )


class _State(univ.Sequence):
    componentType = namedtype.NamedTypes(
        namedtype.NamedType("state", univ.Enumerated()),
        namedtype.NamedType("entryUUID", univ.OctetString()),
        namedtype.OptionalNamedType("cookie", univ.OctetString()),
    )


class _Done(univ.Sequence):
    componentType = namedtype.NamedTypes(
        namedtype.OptionalNamedType("cookie", univ.OctetString()),
        namedtype.DefaultedNamedType("refreshDeletes", univ.Boolean(False)),
    )


def _tagged(number: int, kind: Any, form: int = tag.tagFormatConstructed) -> Any:
    """``kind`` as the CHOICE's ``[number]`` (implicit tags, as RFC 4533's module says)."""
    return kind.subtype(implicitTag=tag.Tag(tag.tagClassContext, form, number))


class _Phase(univ.Sequence):  # refreshDelete [1], refreshPresent [2]
    componentType = namedtype.NamedTypes(
        namedtype.OptionalNamedType("cookie", univ.OctetString()),
        namedtype.DefaultedNamedType("refreshDone", univ.Boolean(True)),
    )


class _IdSet(univ.Sequence):  # syncIdSet [3]
    componentType = namedtype.NamedTypes(
        namedtype.OptionalNamedType("cookie", univ.OctetString()),
        namedtype.DefaultedNamedType("refreshDeletes", univ.Boolean(False)),
        namedtype.NamedType("syncUUIDs", univ.SetOf(componentType=univ.OctetString())),
    )


class _Info(univ.Choice):
    componentType = namedtype.NamedTypes(
        namedtype.NamedType("newcookie", _tagged(0, univ.OctetString(), tag.tagFormatSimple)),
        namedtype.NamedType("refreshDelete", _tagged(1, _Phase())),
        namedtype.NamedType("refreshPresent", _tagged(2, _Phase())),
        namedtype.NamedType("syncIdSet", _tagged(3, _IdSet())),
    )


def request_control(cookie: bytes | None) -> tuple[str, bool, bytes]:
    """The Sync Request Control of a refreshOnly search (critical: a server that cannot
    honour it must refuse the search, not answer it as an ordinary one)."""
    value = _Request()
    value["mode"] = 1
    if cookie is not None:
        value["cookie"] = cookie
    return (SYNC_REQUEST, True, encoder.encode(value))


@dataclass(slots=True)
class Replica:
    """One search's copy: each entry (``dn``, ``attributes``) by its entryUUID, and the
    cookie that says how far it is."""

    cookie: bytes | None = None
    entries: dict[bytes, dict[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class _Refresh:
    present: set[bytes] = field(default_factory=set)
    changed: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    deleted: set[bytes] = field(default_factory=set)
    present_phase: bool = False


def _value(raw: Any, spec: Any) -> Any:
    try:
        decoded, rest = decoder.decode(raw, asn1Spec=spec)
    except PyAsn1Error as exc:
        raise SyncUnavailable(f"an unreadable syncrepl message: {exc}") from None
    if rest:
        raise SyncUnavailable("a syncrepl message with trailing bytes")
    return decoded


def _take(item: dict[str, Any], seen: _Refresh) -> None:
    """One message of the refresh noted in ``seen``."""
    if item.get("type") == "intermediateResponse":
        if item.get("responseName") != SYNC_INFO:
            raise SyncUnavailable(f"an unknown intermediate response {item.get('responseName')}")
        info = _value(item.get("responseValue") or b"", _Info())
        which = info.getName()
        if which == "refreshPresent":
            seen.present_phase = True
        elif which == "syncIdSet":
            ids = {bytes(u) for u in info["syncIdSet"]["syncUUIDs"]}
            if info["syncIdSet"]["refreshDeletes"]:
                seen.deleted |= ids
            else:
                seen.present |= ids
                seen.present_phase = True
        return
    if item.get("type") == "searchResRef":
        raise SyncUnavailable("the server refers part of the search elsewhere")
    if item.get("type") != "searchResEntry":
        return
    control = (item.get("controls") or {}).get(SYNC_STATE)
    if control is None:
        raise SyncUnavailable("an entry without its sync state: not a syncrepl answer")
    state = _value(control["value"], _State())
    uuid, kind = bytes(state["entryUUID"]), int(state["state"])
    if kind == PRESENT:
        seen.present.add(uuid)
        seen.present_phase = True
    elif kind in (ADD, MODIFY):
        seen.changed[uuid] = {"dn": item["dn"], "attributes": item.get("attributes") or {}}
    elif kind == DELETE:
        seen.deleted.add(uuid)


def refresh(
    conn: Any, base: str, query: str, attributes: list[str], replica: Replica
) -> tuple[Replica, int]:
    """``replica`` brought up to date by one refreshOnly search; the new replica (the old one
    is left as it was) and how many entries came with their attributes. Raises
    SyncUnavailable when the answer is refused, partial or not understood."""
    import ldap3
    import ldap3.core.exceptions as errors

    try:
        conn.search(
            base,
            query,
            ldap3.SUBTREE,
            attributes=attributes,
            dereference_aliases=ldap3.DEREF_NEVER,  # (syncprov refuses any other)
            controls=[request_control(replica.cookie)],
        )
    except errors.LDAPOperationResult as exc:  # (the sync's connections raise on a code)
        code, why = getattr(exc, "result", None), f"{type(exc).__name__}: {exc}"
    else:
        result = conn.result or {}
        code, why = result.get("result"), f"{result.get('description')}: {result.get('message')}"
    if code == REFRESH_REQUIRED and replica.cookie is not None:  # (start again, whole)
        return refresh(conn, base, query, attributes, Replica())
    if code != 0:
        raise SyncUnavailable(why)
    done_control = (result.get("controls") or {}).get(SYNC_DONE)
    if done_control is None:
        raise SyncUnavailable("the search ended without its sync-done control")
    done = _value(done_control["value"], _Done())
    seen = _Refresh()
    for item in conn.response or []:
        _take(item, seen)
    if not done["refreshDeletes"]:
        seen.present_phase = True
    if seen.present_phase:  # (what the server did not name as present is gone)
        kept = {u: e for u, e in replica.entries.items() if u in seen.present}
    else:  # (a delete phase: what it did not name is unchanged)
        kept = dict(replica.entries)
    kept.update(seen.changed)
    for uuid in seen.deleted:
        kept.pop(uuid, None)
    cookie = bytes(done["cookie"]) if done["cookie"].isValue else replica.cookie
    return Replica(cookie, kept), len(seen.changed)
