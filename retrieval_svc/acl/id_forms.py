"""When two ids are the same id: as the system that issued them compares them (design.md §17).

Folding every id one way merges ids their issuer keeps apart: full case folding maps ``ß`` to
``ss``, ``ﬃ`` to ``ffi`` and the Kelvin sign to ``k``, so ``ceo@faß.example`` would reach the
person whose mail is ``ceo@fass.example`` — two domains under IDNA2008. So each stored id has a
*kind*, decided when it is stored from the attribute it was read from (``attribute_kind``: a
sync's ``users.id_attribute`` and ``users.aliases``, SCIM's attributes, the map) and stored
with it, and is kept in that kind's compared form; an id a caller sends is put in each kind's
form and looked up in that kind's ids only.

* ``email`` — LDAP ``mail`` (``caseIgnoreIA5Match``: ASCII case only), SCIM ``emails``, any
  ``*mail*`` attribute, a directory's id when ``id_attribute`` is one of them: the local part
  equal but for ASCII case (other letters exactly, in NFC), the domain equal as IDNA2008 /
  UTS #46 non-transitional A-labels (``faß`` is ``xn--fa-hia``, not ``fass``), one trailing
  dot (the root) ignored;
* ``directory`` — a directory's other attributes (``uid``, ``cn``, ``employeeNumber``…):
  equal under LDAP's ``caseIgnoreMatch`` (RFC 4518: stringprep table B.2 case folding, NFKC,
  insignificant spaces), as the directory itself compares them;
* ``ad`` — Active Directory's ``userPrincipalName`` and ``sAMAccountName`` (syntax
  String(Unicode): "a case-insensitive Unicode string"): equal but for case, code point by
  code point (Unicode's simple lowercase: no letter becomes two, no width or compatibility
  folding), the whole name as one string — a UPN's suffix is not a DNS name to AD;
* ``scim`` — SCIM ``userName`` (RFC 7643, ``caseExact`` false): compared as ``ad`` is;
* ``exact`` — SCIM ``externalId`` (``caseExact`` true) and the explicit map: equal in NFC.
"""

from __future__ import annotations

import re
import stringprep
import unicodedata
from typing import Literal

import idna

Kind = Literal["email", "directory", "ad", "scim", "exact"]
KINDS: tuple[Kind, ...] = ("email", "directory", "ad", "scim", "exact")
MAX_COMPARED = 255  # what the alias column holds: the compared form is what is stored

_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SPACES = re.compile(r"\s+")


_AD = {"userprincipalname", "samaccountname"}
SCIM_KINDS: dict[str, Kind] = {"userName": "scim", "emails": "email", "externalId": "exact"}


def attribute_kind(attribute: str) -> Kind:
    """The kind of the ids a directory holds in ``attribute`` (LDAP attribute names are
    case-insensitive): e-mail addresses in ``mail`` and the other ``*mail*`` attributes,
    Active Directory's names in ``userPrincipalName`` and ``sAMAccountName``, anything else
    compared by ``caseIgnoreMatch``."""
    name = attribute.lower()
    if "mail" in name:
        return "email"
    if name in _AD:
        return "ad"
    return "directory"


def stored_kind(source: str, attribute: str) -> Kind:
    """The kind of a row stored before kinds were stored with it, as narrow as it can be:
    a sync's own id (attribute ``id``) was stored without its attribute, so it is compared
    exactly until the next sync stores it with its kind."""
    if source == "map" or attribute in ("id", "map"):
        return "exact"
    if source == "scim" or source.startswith("scim:"):  # (scim:<key>: each key its own)
        return SCIM_KINDS.get(attribute, "exact")
    return attribute_kind(attribute)


def _email(value: str) -> str:
    local, at, domain = value.strip().rpartition("@")
    if not at or not local or not domain:
        return _exact(value)
    local = unicodedata.normalize("NFC", local).translate(_ASCII_UPPER)
    try:
        label = idna.encode(domain.removesuffix("."), uts46=True, transitional=False)
        host = label.decode("ascii")
    except (idna.IDNAError, UnicodeError):
        host = unicodedata.normalize("NFC", domain).translate(_ASCII_UPPER)  # (kept as written)
    return f"{local}@{host.lower()}"


def _directory(value: str) -> str:
    if value.isascii():  # (no ASCII character is in table B.1; B.2 folds A–Z; NFKC keeps it)
        return _SPACES.sub(" ", value.translate(_ASCII_UPPER)).strip()
    mapped = "".join(stringprep.map_table_b2(c) for c in value if not stringprep.in_table_b1(c))
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", mapped)).strip()


def _caseless(value: str) -> str:
    def lower(ch: str) -> str:
        low = ch.lower()
        return low if len(low) == 1 else ch  # (a full mapping to two letters is no case)

    return "".join(map(lower, unicodedata.normalize("NFC", value).strip()))


def _exact(value: str) -> str:
    return unicodedata.normalize("NFC", value)


_FORMS = {
    "email": _email,
    "directory": _directory,
    "ad": _caseless,
    "scim": _caseless,
    "exact": _exact,
}


def compared(kind: Kind, value: str) -> str:
    """``value`` as ids of ``kind`` are compared (and stored)."""
    return _FORMS[kind](value)
