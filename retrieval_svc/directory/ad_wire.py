"""What an Active Directory server answers over LDAP beyond plain LDAP: the root DSE that says
it is AD, and multi-valued attributes given by range (``member;range=0-1499`` …, as a Windows
DC answers past MaxValRange), read to the end or refused — never a partial list taken for the
whole. ``ad.py`` turns what is read into a directory."""

from __future__ import annotations

from typing import Any

from retrieval_svc.directory.groups import DirectoryError

AD_CAPABILITY = "1.2.840.113556.1.4.800"  # LDAP_CAP_ACTIVE_DIRECTORY_OID


def is_ad(root: dict[str, Any]) -> bool:
    """Whether a root DSE is Active Directory's (or Samba's AD DC)."""
    capabilities = root.get("supportedCapabilities") or []
    if isinstance(capabilities, str):
        capabilities = [capabilities]
    return AD_CAPABILITY in capabilities or bool(root.get("forestFunctionality"))


def root_dse(conn: Any) -> dict[str, Any]:
    """The root DSE's attributes that say what the server is (empty if it hides them)."""
    import ldap3

    conn.search("", "(objectClass=*)", ldap3.BASE, attributes=[
        "supportedCapabilities", "forestFunctionality", "highestCommittedUSN",
        "defaultNamingContext", "dsServiceName"])  # fmt: skip
    found = [r for r in conn.response or [] if r.get("type") == "searchResEntry"]
    return dict(found[0].get("attributes", {})) if found else {}


def range_of(key: str, attribute: str) -> tuple[int, int | None] | None:
    """``member;range=1500-2999`` → (1500, 2999); ``member;range=3000-*`` → (3000, None);
    None when ``key`` is not a range of ``attribute``."""
    name, _, rest = key.partition(";")
    if name.lower() != attribute.lower() or not rest.lower().startswith("range="):
        return None
    low, sep, high = rest[len("range=") :].partition("-")
    if not sep or not low.isdigit() or not (high == "*" or high.isdigit()):
        raise DirectoryError(f"the server answered an unreadable range: {key!r}")
    return int(low), None if high == "*" else int(high)


def ranged(conn: Any, entry: dict[str, Any], attribute: str) -> list[bytes]:
    """Every value of a multi-valued attribute, following ``attr;range=…`` answers (as AD
    gives past MaxValRange) until the range ending in ``*``; DirectoryError if a step is
    missing or out of order (a partial member list is never taken for the whole)."""
    import ldap3

    raw: dict[str, list[bytes]] = entry.get("raw_attributes", {})
    values = list(raw.get(attribute, []))
    keys = [(k, r) for k in raw if (r := range_of(k, attribute)) is not None]
    while keys:
        key, (low, high) = keys[0]
        if low != len(values) or len(keys) > 1:
            raise DirectoryError(f"{entry['dn']}: {key} does not follow {len(values)} values")
        if not raw[key] and low == 0:
            return values  # (an attribute asked for by range that the entry does not hold)
        values += raw[key]
        if high is None:
            return values
        asked = f"{attribute};range={high + 1}-*"
        conn.search(entry["dn"], "(objectClass=*)", ldap3.BASE, attributes=[asked])
        answer = [r for r in conn.response or [] if r.get("type") == "searchResEntry"]
        if not answer:
            raise DirectoryError(f"{entry['dn']}: {asked} answered nothing: a partial list")
        raw = answer[0].get("raw_attributes", {})
        keys = [(k, r) for k in raw if (r := range_of(k, attribute)) is not None]
        if not keys:
            raise DirectoryError(f"{entry['dn']}: {asked} answered no range: a partial list")
    return values
