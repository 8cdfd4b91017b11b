"""Which fields a filter may name, and of what kind (design.md §3, §5).

Chunk fields are fixed by the mapping in ``mappings/``. Custom metadata fields are whatever
the index mapping holds under ``metadata.*``; a bare name (``category``) means
``metadata.category`` unless it is a chunk field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """How a field is indexed, which decides the operators it supports."""

    KEYWORD = "keyword"
    TEXT = "text"
    NUMBER = "number"
    DATE = "date"
    BOOLEAN = "boolean"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A filterable field: its public name, the Elasticsearch field and kind."""

    name: str
    es_field: str
    kind: Kind
    # Other views of a metadata value, for comparisons as Dify's built-in filter makes them:
    # a text's numeric view (``metadata.x.num``: the text read as a number where it is one)
    # and a number's or date's text view (``metadata.x.text``: the value as written).
    numeric_field: str | None = None
    text_field: str | None = None


CHUNK_FIELDS: dict[str, FieldSpec] = {
    spec.name: spec
    for spec in (
        FieldSpec("chunk_id", "chunk_id", Kind.KEYWORD),
        FieldSpec("document_id", "document_id", Kind.KEYWORD),
        FieldSpec("knowledge_id", "knowledge_id", Kind.KEYWORD),
        FieldSpec("content", "content", Kind.TEXT),
        FieldSpec("document_title", "document_title.keyword", Kind.KEYWORD),
        FieldSpec("document_name", "document_name", Kind.KEYWORD),
        FieldSpec("dataset_name", "dataset_name", Kind.KEYWORD),
        FieldSpec("source_file_url", "source_file_url", Kind.KEYWORD),
        FieldSpec("segment_position", "segment_position", Kind.NUMBER),
        FieldSpec("access_roles", "access_roles", Kind.KEYWORD),
        FieldSpec("content_hash", "content_hash", Kind.KEYWORD),
        FieldSpec("source_etag", "source_etag", Kind.KEYWORD),
        FieldSpec("indexed_at", "indexed_at", Kind.DATE),
    )
}

_ES_KINDS = {
    "keyword": Kind.KEYWORD,
    "constant_keyword": Kind.KEYWORD,
    "text": Kind.TEXT,
    "match_only_text": Kind.TEXT,
    "long": Kind.NUMBER,
    "integer": Kind.NUMBER,
    "short": Kind.NUMBER,
    "byte": Kind.NUMBER,
    "double": Kind.NUMBER,
    "float": Kind.NUMBER,
    "half_float": Kind.NUMBER,
    "scaled_float": Kind.NUMBER,
    "unsigned_long": Kind.NUMBER,
    "date": Kind.DATE,
    "date_nanos": Kind.DATE,
    "boolean": Kind.BOOLEAN,
}


NUMERIC_SUBFIELD = "num"
TEXT_SUBFIELD = "text"


def _flatten(
    properties: Mapping[str, Any],
    prefix: str,
    out: dict[str, Kind],
    views: dict[str, set[str]],
) -> None:
    for name, spec in properties.items():
        path = f"{prefix}.{name}"
        if "properties" in spec:
            _flatten(spec["properties"], path, out, views)
        elif spec.get("type") in _ES_KINDS:
            out[path] = _ES_KINDS[spec["type"]]
            subfields = spec.get("fields") or {}
            for view, kind in ((NUMERIC_SUBFIELD, Kind.NUMBER), (TEXT_SUBFIELD, Kind.KEYWORD)):
                if _ES_KINDS.get(subfields.get(view, {}).get("type", "")) is kind:
                    views[view].add(path)


class FieldCatalog:
    """Chunk fields plus the custom metadata fields present in the index mapping."""

    def __init__(
        self,
        metadata: Mapping[str, Kind] | None = None,
        views: Mapping[str, set[str]] | None = None,
    ) -> None:
        self._metadata = dict(metadata or {})
        self._views = {k: frozenset(v) for k, v in (views or {}).items()}

    @classmethod
    def from_mappings(cls, mappings: Mapping[str, Any]) -> FieldCatalog:
        """From a ``GET <index>/_mapping`` answer (every index behind the alias)."""
        found: dict[str, Kind] = {}
        views: dict[str, set[str]] = {NUMERIC_SUBFIELD: set(), TEXT_SUBFIELD: set()}
        for index in mappings.values():
            meta = index.get("mappings", {}).get("properties", {}).get("metadata", {})
            _flatten(meta.get("properties", {}), "metadata", found, views)
        return cls(found, views)

    def _view(self, path: str, view: str) -> str | None:
        return f"{path}.{view}" if path in self._views.get(view, ()) else None

    def lookup(self, name: str) -> FieldSpec | None:
        """The field a filter names, or None if unknown."""
        if name in CHUNK_FIELDS:
            return CHUNK_FIELDS[name]
        path = name if name.startswith("metadata.") else f"metadata.{name}"
        kind = self._metadata.get(path)
        if kind is None:
            return None
        return FieldSpec(
            name,
            path,
            kind,
            numeric_field=self._view(path, NUMERIC_SUBFIELD),
            text_field=self._view(path, TEXT_SUBFIELD),
        )

    def __eq__(self, other: object) -> bool:
        """Same fields, kinds and views (a reloaded mapping that changed nothing)."""
        if not isinstance(other, FieldCatalog):
            return NotImplemented
        return self._metadata == other._metadata and self._views == other._views

    __hash__ = None  # type: ignore[assignment]  # (mutable by construction: not a dict key)

    def restricted_to(self, paths: Iterable[str]) -> FieldCatalog:
        """This catalog with only the metadata fields in ``paths`` (the chunk fields stay)."""
        keep = frozenset(paths)
        metadata = {p: k for p, k in self._metadata.items() if p in keep}
        return FieldCatalog(metadata, {v: set(ps & keep) for v, ps in self._views.items()})

    def metadata_paths(self) -> list[str]:
        """The custom fields' Elasticsearch paths (``metadata.category``, …)."""
        return sorted(self._metadata)

    def known_names(self) -> list[str]:
        """Every name a filter may use, for error messages."""
        custom = sorted(p.removeprefix("metadata.") for p in self._metadata)
        return [*CHUNK_FIELDS, *custom]
