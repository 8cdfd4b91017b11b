"""What a stored name may hold: one check for every role, user id, group and knowledge-base
pattern, at every way in (CLI, console, SCIM, LDAP sync, key files, CSV import).

Derived from what the policy stores round-trip. The database stores read a rule field by field
and the CSV files are read and written with quoting, so no stored value is ever parsed as
syntax: commas, quotes, brackets and parentheses are ordinary characters. What is refused is
what no store or form can hold verbatim or what means nothing as a name:

* nothing at all, or only white space;
* white space at either end (a form, a CSV cell or an LDAP attribute would lose it, and
  ``" finance"`` beside ``"finance"`` is a trap, not a distinction);
* control characters (NUL cannot be stored by PostgreSQL; a line break ends a CSV line),
  lone surrogates (not UTF-8) and the Unicode line and paragraph separators;
* more than ``MAX_NAME`` characters (the policy table's column width).

The ground floor: imports nothing of the project.
"""

from __future__ import annotations

import unicodedata

MAX_NAME = 255  # characters: the policy table's columns are VARCHAR(255)

# Cc: controls (NUL, line breaks, DEL…); Cs: lone surrogates (no UTF-8 form); Zl, Zp: the
# line and paragraph separators (a line break to str.splitlines and to many editors).
_REFUSED = {"Cc": "a control character", "Cs": "a lone surrogate", "Zl": "a line separator"}
_REFUSED["Zp"] = "a paragraph separator"


def name_problem(what: str, value: object) -> str | None:
    """Why ``value`` cannot be a stored name (``what`` names it in the message), else None."""
    if not isinstance(value, str):
        return f"{what} must be text, not {type(value).__name__}"
    if not value.strip():
        return f"{what} is empty"
    if len(value) > MAX_NAME:
        return f"{what} is longer than {MAX_NAME} characters ({len(value)})"
    if value != value.strip():
        return f"{what} {value!r} begins or ends with white space: remove it"
    if value.isprintable():  # (every refused category is unprintable to Python)
        return None
    for position, char in enumerate(value):
        kind = _REFUSED.get(unicodedata.category(char))
        if kind is not None:
            return (
                f"{what} {value!r} holds {kind} (U+{ord(char):04X}) at position {position + 1}: "
                "a name cannot hold one"
            )
    return None


def check_name(what: str, value: object) -> str:
    """``value`` as a stored name; raises ValueError saying what is wrong and where."""
    problem = name_problem(what, value)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, str)
    return value
