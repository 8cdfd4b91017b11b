"""Document metadata is untrusted input (issue #37 §1): bounded before anything uses it.

Front matter, sidecars and manifest lines come from whoever wrote the bucket. A 554-byte front
matter whose YAML aliases nest nine deep (``a1: &a1 [*a0, *a0, …]``, the "billion laughs")
loads as a few shared lists, cheaply; whatever walks the value afterwards — merging, dates,
JSON for Elasticsearch — meets 9⁹ elements and grew the indexer to 23 GB. So:

* YAML aliases (``*name``) are refused in front matter: metadata has no use for them, and a
  refusal is clearer than a cap. Anchors alone are harmless and ignored.
* Front matter and sidecars are bounded in bytes (``MAX_FRONT_MATTER_BYTES``,
  ``MAX_SIDECAR_BYTES``), checked before they are parsed.
* Every merged value is walked once under a budget — nesting depth, total values, string
  length, list length — counting a shared object each time it is met, as a serialiser would;
  ``access_roles`` holds at most ``MAX_ITEMS`` (1,024) roles, the API's own cap.

A document over any bound is a failed document whose reason names the bound; nothing of it
is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from retrieval_svc.acl.values import MAX_ITEMS

MAX_FRONT_MATTER_BYTES = 65_536
MAX_SIDECAR_BYTES = 1_048_576
MAX_DEPTH = 16
MAX_VALUES = 10_000  # every key, list item and scalar of a document's metadata
MAX_STRING_CHARS = 32_768

# libyaml's event parser where PyYAML was built with it, else the Python one.
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class MetadataLimitError(ValueError):
    """Metadata over a bound; the message names the bound and the value."""


def refuse_aliases(text: str) -> None:
    """Raise ``MetadataLimitError`` if the YAML ``text`` uses an alias (a ``*name``)."""
    for event in yaml.parse(text, Loader=_PARSER):
        if isinstance(event, yaml.AliasEvent):
            raise MetadataLimitError(
                f"front matter uses the YAML alias *{event.anchor}: aliases are not read in "
                "metadata (one can expand a few bytes into gigabytes); write the values out"
            )


def check_bytes(size: int, limit: int, what: str) -> None:
    """Raise ``MetadataLimitError`` if ``what`` of ``size`` bytes is over ``limit``."""
    if size > limit:
        raise MetadataLimitError(f"{what} is {size:,} bytes, over the limit of {limit:,}")


def check_metadata(meta: Mapping[str, Any]) -> None:
    """Raise ``MetadataLimitError`` if ``meta`` is over a bound (depth, values, string and
    list lengths, roles); a shared value counts each time it is met."""
    count = 0
    todo: list[tuple[Any, int, str]] = [(meta, 0, "")]
    while todo:
        value, depth, path = todo.pop()
        count += 1
        if count > MAX_VALUES:
            raise MetadataLimitError(f"metadata holds more than {MAX_VALUES:,} values")
        if depth > MAX_DEPTH:
            raise MetadataLimitError(f"metadata {path} nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, str | bytes):
            if len(value) > MAX_STRING_CHARS:
                raise MetadataLimitError(
                    f"metadata {path} is a string of {len(value):,} characters, over the "
                    f"limit of {MAX_STRING_CHARS:,}"
                )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                todo.append((key, depth + 1, path))
                todo.append((item, depth + 1, f"{path}.{key}" if path else str(key)))
        elif isinstance(value, list | tuple | set | frozenset):
            if path == "access_roles" and len(value) > MAX_ITEMS:
                raise MetadataLimitError(
                    f"access_roles holds {len(value):,} roles, over the limit of {MAX_ITEMS:,}"
                )
            if len(value) > MAX_VALUES:
                raise MetadataLimitError(
                    f"metadata {path} is a list of {len(value):,} items, over {MAX_VALUES:,}"
                )
            todo.extend((item, depth + 1, f"{path}[]") for item in value)
