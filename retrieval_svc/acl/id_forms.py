"""When two ids are the same id: as the system that issued them compares them (design.md §17).

Folding every id one way merges ids their issuer keeps apart: full case folding maps ``ß`` to
``ss``, ``ﬃ`` to ``ffi`` and the Kelvin sign to ``k``, so ``ceo@faß.example`` would reach the
person whose mail is ``ceo@fass.example`` — two domains under IDNA2008. So each stored id has a
*kind*, given by where it came from, and is kept in that kind's compared form; an id a caller
sends is put in each kind's form and looked up in that kind's ids only.

* ``email`` — LDAP ``mail`` (``caseIgnoreIA5Match``), SCIM ``emails``, any ``*mail*``
  attribute: the local part equal but for ASCII case (other letters exactly, in NFC), the
  domain equal as IDNA2008 / UTS #46 non-transitional A-labels (``faß`` is ``xn--fa-hia``,
  not ``fass``);
* ``directory`` — a directory's id and other attributes (``uid``, ``userPrincipalName``…):
  equal under LDAP's ``caseIgnoreMatch`` (RFC 4518: stringprep table B.2 case folding, NFKC,
  insignificant spaces), as the directory itself compares them;
* ``scim`` — SCIM ``userName`` (RFC 7643, ``caseExact`` false): equal but for case, code
  point by code point (Unicode's simple lowercase: no letter becomes two);
* ``exact`` — SCIM ``externalId`` (``caseExact`` true) and the explicit map: equal in NFC.
"""

from __future__ import annotations

import re
import stringprep
import unicodedata
from typing import Literal

import idna

Kind = Literal["email", "directory", "scim", "exact"]
KINDS: tuple[Kind, ...] = ("email", "directory", "scim", "exact")
MAX_COMPARED = 255  # what the alias column holds: the compared form is what is stored

_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SPACES = re.compile(r"\s+")


def kind_of(source: str, attribute: str) -> Kind:
    """The kind of an id stored by ``source`` (``ldap:<sync>``, ``scim:<key>``, ``map``) from
    ``attribute``."""
    if "mail" in attribute.lower():
        return "email"
    if source == "map" or attribute == "externalId":
        return "exact"
    if source == "scim" or source.startswith("scim:"):
        return "scim"
    return "directory"


def _email(value: str) -> str:
    local, at, domain = value.strip().rpartition("@")
    if not at or not local or not domain:
        return _exact(value)
    local = unicodedata.normalize("NFC", local).translate(_ASCII_UPPER)
    try:
        host = idna.encode(domain.rstrip("."), uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        host = unicodedata.normalize("NFC", domain).translate(_ASCII_UPPER)  # (kept as written)
    return f"{local}@{host.lower()}"


def _directory(value: str) -> str:
    if value.isascii():  # (no ASCII character is in table B.1; B.2 folds A–Z; NFKC keeps it)
        return _SPACES.sub(" ", value.translate(_ASCII_UPPER)).strip()
    mapped = "".join(stringprep.map_table_b2(c) for c in value if not stringprep.in_table_b1(c))
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", mapped)).strip()


def _scim(value: str) -> str:
    def lower(ch: str) -> str:
        low = ch.lower()
        return low if len(low) == 1 else ch  # (a full mapping to two letters is no case)

    return "".join(map(lower, unicodedata.normalize("NFC", value).strip()))


def _exact(value: str) -> str:
    return unicodedata.normalize("NFC", value)


_FORMS = {"email": _email, "directory": _directory, "scim": _scim, "exact": _exact}


def compared(kind: Kind, value: str) -> str:
    """``value`` as ids of ``kind`` are compared (and stored)."""
    return _FORMS[kind](value)
