"""Roles from an object's tags (``--roles-tag NAME``, issue #35 §2).

S3 object tagging (and OSS tagging through its S3-compatible API) holds up to ten tags per
object; a value is at most 256 characters of letters, digits, spaces and ``+ - = . _ : / @``
— no commas, no brackets. So a roles tag is a **space-separated** list of role names::

    access_roles = "finance hr-comp 运维工程师"

An empty value means public, as ``access_roles: []`` does; an absent tag says nothing (the
next source of roles decides). A value with a character outside that set, or naming a role no
principal can hold (``user:…``, ``anyone``), fails the document: it is never published.
"""

from __future__ import annotations

import re

from retrieval_svc.key_entry import reserved_role

DEFAULT_ROLES_TAG = "access_roles"
MAX_TAG_VALUE = 256
# S3's documented character set for tag values (Unicode letters and digits, whitespace, and
# + - = . _ : / @). Roles are separated by whitespace.
_TAG_VALUE = re.compile(r"^[\w\s+\-=.:/@]*$")


class TagError(ValueError):
    """A roles tag that cannot be read."""


def roles_from_tag(name: str, value: str) -> list[str]:
    """The roles a tag ``name`` with ``value`` gives; raises TagError."""
    if len(value) > MAX_TAG_VALUE:
        raise TagError(f"tag {name} is over {MAX_TAG_VALUE} characters")
    if not _TAG_VALUE.match(value):
        bad = sorted({c for c in value if not _TAG_VALUE.match(c)})
        raise TagError(
            f"tag {name} holds {''.join(bad)!r}: roles in a tag are separated by spaces "
            "(tag values allow letters, digits, spaces and + - = . _ : / @ only)"
        )
    roles = list(dict.fromkeys(value.split()))
    for role in roles:
        if (why := reserved_role(role)) is not None:
            raise TagError(f"tag {name}: {why}")
    return roles
