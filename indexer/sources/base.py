"""What every source gives the indexer: listed objects (``ObjectRef``), what its listing could
not complete (``ListingFailure``), and the ``Source`` protocol the folder and the object stores
follow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from indexer.documents import DocumentError
from indexer.metadata_limits import MAX_SIDECAR_BYTES, MetadataLimitError, check_bytes
from indexer.passing_over import PassedOver
from indexer.permissions.dacl import FileAccess


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A listed object: its key under the source, where it is, its version, and what makes
    it the same document across runs."""

    key: str
    uri: str
    etag: str
    size: int
    identity: str
    # The version of its ``.meta.json`` sidecar as the listing saw it ("" for none), so a
    # sidecar edited with the document untouched is seen as a change of its roles.
    sidecar: str = ""
    # Who reads it by its own access list, read with the listing (an SMB share's DACL): None
    # where the source keeps none; a string says why it could not be read or decided (the
    # document is withdrawn, never published).
    dacl: FileAccess | str | None = None


@dataclass(frozen=True, slots=True)
class ListingFailure:
    """A part of the source the listing could not read: never taken for an empty part.

    ``scope`` says what is unknown because of it: ``folder``, everything below the folder
    ``key`` (its documents are withdrawn: their permission sources cannot be read); ``key``,
    the one object ``key`` (withdrawn likewise); ``rest``, every key the listing had not
    reached (an object store's page that failed after its retries: nothing is pruned).
    """

    key: str
    reason: str
    scope: str = "folder"

    def covers(self, name: str) -> bool:
        """Whether the document named ``name`` (its key) lies where this failure is."""
        if self.scope == "key":
            return name == self.key
        if self.scope == "folder":
            return not self.key or name.startswith(self.key.rstrip("/") + "/")
        return False

    @property
    def shown(self) -> str:
        """The failure's place as the summary names it."""
        if self.scope == "folder":
            return (self.key.rstrip("/") + "/") if self.key else "./"
        if self.scope == "rest":
            return f"{self.key or '(the start)'} …"
        return self.key


class Source(Protocol):
    """Something that lists and reads objects."""

    description: str
    location: str  # where its objects' addresses (``ObjectRef.uri``) start
    passed_over: PassedOver  # what ``list`` passed over so far, by reason
    failures: list[ListingFailure]  # what ``list`` could not read so far

    def list(self) -> Iterator[ObjectRef]:
        """Every indexable object, streamed."""
        ...

    def look(self, key: str) -> ObjectRef | None:
        """The object at ``key`` now, as ``list`` would give it; None where it would not."""
        ...

    def under(self, folder: str) -> Iterator[ObjectRef]:
        """The objects below the folder ``folder`` (a key prefix), as ``list`` gives them."""
        ...

    def read(self, ref: ObjectRef) -> bytes:
        """The object's bytes."""
        ...

    def sidecar(self, ref: ObjectRef) -> dict[str, Any]:
        """The object's ``.meta.json`` sidecar, or ``{}``."""
        ...

    def tags(self, ref: ObjectRef) -> dict[str, str]:
        """The object's tags (an object store's; a folder has none)."""
        ...


def parse_sidecar(data: bytes, name: str) -> dict[str, Any]:
    """A sidecar's bytes as its metadata; DocumentError when it is too large or not a JSON
    object."""
    try:
        check_bytes(len(data), MAX_SIDECAR_BYTES, f"sidecar {name}")
    except MetadataLimitError as exc:
        raise DocumentError(str(exc)) from None
    try:
        parsed = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DocumentError(f"sidecar {name} is not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise DocumentError(f"sidecar {name} must hold a JSON object")
    return parsed
