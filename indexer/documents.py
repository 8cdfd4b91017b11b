"""From one source object to its chunk documents (pure: no I/O).

Metadata is merged in the order of design.md §3 and §16 — the document's folder rule and roles
tag, then its front matter, sidecar and manifest line, then a rule that overrides them — later
sources winning key by key. ``access_roles`` must parse (see ``retrieval_svc.acl.parse_roles``);
a document whose ACL cannot be read is refused, never indexed as public.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from pathlib import PurePosixPath
from typing import Any

import yaml

from indexer.chunking import ChunkOptions, blocks, chunk_sections
from indexer.metadata_limits import (
    MAX_FRONT_MATTER_BYTES,
    MetadataLimitError,
    check_metadata,
    refuse_aliases,
)
from indexer.permissions import Outside
from indexer.permissions.dacl import FileAccess, role_of
from retrieval_svc.acl import DEFAULT_TENANT, RoleValueError, parse_roles
from retrieval_svc.key_entry import reserved_role
from retrieval_svc.search.segment import segment

# libyaml's loader when PyYAML was built with it (several times faster), else the Python one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Keys of document metadata that set chunk fields rather than ``metadata.*``.
_TITLE_KEYS = ("document_title", "title")
_RESERVED = frozenset(
    {
        "access_roles",
        "access_roles_from",
        "access_aces",
        "access_narrowed",
        "access_unknown_sids",
        "document_title",
        "title",
        "dataset_name",
        "path",
    }
)
# Metadata the indexer sets itself (docs/indexer.md, "What the metadata says"): what set the
# document's roles (its front matter, sidecar, manifest, tag or folder rule); the file's
# format, pages and pages read by OCR for the whole document; each chunk's heading path, and
# for a page read by OCR its page and mean confidence.
READER_KEYS = (
    "access_roles_from",
    "access_aces",
    "access_narrowed",
    "access_unknown_sids",
    "format",
    "pages",
    "ocr_pages",
    "hidden_sheets",
    "headings",
    "ocr",
    "ocr_confidence",
    "page",
)


class DocumentError(ValueError):
    """This document cannot be indexed; the message says why."""


@dataclass(frozen=True, slots=True)
class SourceObject:
    """One parsed object from a source.

    ``uri`` is where it is, ``identity`` what makes it the same document across runs (the
    object URL for object storage, the path inside the folder for local files, so moving a
    checkout does not change ids), ``etag`` the identity of its bytes.
    """

    uri: str
    identity: str
    name: str
    text: str
    etag: str = ""
    front_matter: Mapping[str, Any] = field(default_factory=dict)
    metadata_layers: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    layer_names: tuple[str, ...] = ()  # what each metadata layer is ("sidecar", "manifest")
    outside: Outside = field(default_factory=Outside)  # its folder rule and roles tag
    # What the reader found: the text in sections, each with marks stored on its chunks
    # (a page read by OCR), the document's own title, and facts of the file (its format).
    sections: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    own_title: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """YAML front matter (``---`` fenced, at the very start) and the remaining body."""
    stripped = text.lstrip("\ufeff")
    if not stripped.startswith("---"):
        return {}, text
    lines = stripped.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return {}, text
    size = 0
    for i, line in enumerate(lines[1:], start=1):
        size += len(line.encode())
        if line.strip() not in ("---", "..."):
            if size > MAX_FRONT_MATTER_BYTES:
                raise DocumentError(
                    f"front matter is over the limit of {MAX_FRONT_MATTER_BYTES:,} bytes"
                )
            continue
        text = "".join(lines[1:i])
        try:
            refuse_aliases(text)
            data = yaml.load(text, Loader=_YAML_LOADER) or {}
        except MetadataLimitError as exc:
            raise DocumentError(str(exc)) from None
        except yaml.YAMLError as exc:
            raise DocumentError(f"front matter is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise DocumentError("front matter must be a mapping of keys to values")
        return data, "".join(lines[i + 1 :])
    raise DocumentError("front matter opened with --- but never closed")


def document_id(knowledge_id: str, identity: str, tenant: str = DEFAULT_TENANT) -> str:
    """Stable id of a source object within a tenant's knowledge base (the default tenant's
    ids are what they were before tenants, so existing indices keep theirs)."""
    scope = knowledge_id if tenant == DEFAULT_TENANT else f"{tenant}\x00{knowledge_id}"
    return hashlib.sha256(f"{scope}\x00{identity}".encode()).hexdigest()[:32]


def chunk_id(doc_id: str, position: int) -> str:
    """Stable id of the chunk at ``position`` (1-based) of a document."""
    return f"{doc_id}-{position:05d}"


def merge_metadata(layers: tuple[Mapping[str, Any], ...]) -> dict[str, Any]:
    """Layers merged key by key, later winning."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return merged


def named_layers(obj: SourceObject) -> list[tuple[str, Mapping[str, Any]]]:
    """Every metadata layer of ``obj``, lowest first, with what it is (design.md §16): the
    file's facts, its folder rule, its roles tag, its front matter, sidecar and manifest line,
    then a rule that overrides them."""
    names = obj.layer_names or ("metadata",) * len(obj.metadata_layers)
    return [
        ("reader", obj.info),
        *obj.outside.below(),
        ("front matter", obj.front_matter),
        *zip(names, obj.metadata_layers, strict=True),
        *obj.outside.above(),
    ]


def roles_source(layers: list[tuple[str, Mapping[str, Any]]], outside: Outside) -> str | None:
    """What set ``access_roles``: the last layer that has it, or the rules file's ``unmatched:
    public``; None when nothing did (public by absence). Raises DocumentError when the rules
    file says ``unmatched: refuse`` and nothing did."""
    for layer in reversed(layers):
        if "access_roles" in layer[1]:
            return str(layer[0])
    if (why := outside.refused()) is not None:
        raise DocumentError(why)
    return outside.unmatched_source()


def bytes_title(body: str, own_title: str | None = None) -> str:
    """The title the bytes give: the file's own title (PDF or Office properties), else its
    first heading; empty when they give none (the file name's stem then)."""
    if own_title and own_title.strip():
        return " ".join(own_title.split())
    for is_heading, text in blocks(body):
        if is_heading:
            return text
    return ""


def document_title(meta: Mapping[str, Any], name: str, from_bytes: str = "") -> str:
    """Metadata title → the title the bytes give (``bytes_title``) → file name stem."""
    for key in _TITLE_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return from_bytes or PurePosixPath(name).stem


_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def metadata_value(value: Any, tz: tzinfo) -> Any:
    """A metadata value as stored. Dates without a zone (YAML dates, ``2026-03-01`` text,
    naive datetimes) are instants in ``tz``: a date-only value is that day's midnight there,
    so filters on it mean the same day wherever the service and Elasticsearch run."""
    if isinstance(value, str) and _DATE_ONLY.match(value.strip()):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError:
            return value  # 2026-13-45: not a date, kept as text
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=tz)).isoformat()
    if isinstance(value, date):  # from YAML, or date-only text
        return datetime(value.year, value.month, value.day, tzinfo=tz).isoformat()
    return value


def _sections(obj: SourceObject) -> list[tuple[str, dict[str, Any]]]:
    """The object's text in runs of sections with the same marks (each run chunked alone)."""
    runs: list[tuple[list[str], dict[str, Any]]] = []
    for text, marks in obj.sections or ((obj.text, {}),):
        if runs and runs[-1][1] == marks:
            runs[-1][0].append(text)
        else:
            runs.append(([text], dict(marks)))
    return [("\n\n".join(texts), marks) for texts, marks in runs]


@dataclass(frozen=True, slots=True)
class Fields:
    """What a document's metadata layers give each of its chunks."""

    title: str
    dataset_name: str
    metadata: dict[str, Any]  # (each chunk's marks are added to it)
    roles: list[str]
    version: str  # the permissions version
    also: list[str] = field(default_factory=list)  # roles that narrow a DACL's (access_also)
    denied: list[str] = field(default_factory=list)  # a DACL's denies (access_denied)


def share_lists(
    roles: list[str], also: list[str], dacl: FileAccess, name: str
) -> tuple[list[str], list[str], tuple[str, ...]]:
    """``access_roles``, ``access_also`` and the narrowed SIDs of a file whose DACL and share
    ACL each need a list of their own (``indexer.permissions.share``). ``also``: what a rules
    file, sidecar or other layer narrows it to. With it there are three lists for two: the
    DACL's and the share's fold into the SIDs both name — narrower, never wider."""
    share = [role_of(sid) for sid in dacl.also]
    if not also:
        return roles, share, dacl.narrowed
    folded = [sid for sid in dacl.allow if sid in dacl.also]
    if not folded:
        raise DocumentError(NOBODY_THREE.format(name=name, share=dacl.share))
    cut = tuple(sid for sid in (*dacl.allow, *dacl.also) if sid not in folded)
    return [role_of(sid) for sid in folded], also, tuple(dict.fromkeys((*dacl.narrowed, *cut)))


NOBODY_THREE = (
    "its DACL and the ACL of share {share} name no SID in common, and another layer narrows it "
    "too: the index cannot hold three lists, so no one is given it: not indexed"
)


def document_fields(obj: SourceObject, title: str, dataset_name: str, tz: tzinfo) -> Fields:
    """The chunk fields ``obj``'s layers set (``title``: what its bytes give, see
    ``bytes_title``). Raises DocumentError when its metadata or roles cannot be indexed."""
    layers = named_layers(obj)
    meta = merge_metadata(tuple(layer for _, layer in layers))
    try:
        check_metadata(meta)
    except MetadataLimitError as exc:
        raise DocumentError(str(exc)) from None
    try:
        roles = parse_roles(meta.get("access_roles"))
    except RoleValueError as exc:
        raise DocumentError(f"access_roles cannot be read: {exc}") from exc
    for role in roles:  # no principal holds such a role: the document would be nobody's
        if (why := reserved_role(role)) is not None:
            raise DocumentError(
                f"access_roles: {why}; per-user sharing is not supported, give the document "
                "a role and grant it to the user (retrieval-svc policy grant-role)"
            )
    also: list[str] = []
    denied: list[str] = []
    roles_from: str | None
    custom = {k: metadata_value(v, tz) for k, v in meta.items() if k not in _RESERVED}
    if (dacl := obj.outside.dacl) is not None:
        # The file's own DACL (and its share's ACL) decide; any other layer may only narrow.
        layered = list(roles)
        also, roles, narrowed = layered, [role_of(sid) for sid in dacl.allow], dacl.narrowed
        if dacl.also:
            roles, also, narrowed = share_lists(roles, layered, dacl, obj.name)
        denied = [role_of(sid) for sid in dacl.deny]
        narrowing = next((str(n) for n, layer in reversed(layers) if "access_roles" in layer), "")
        roles_from = f"DACL of {obj.name}" + (f", share {dacl.share}" if dacl.share else "")
        roles_from += f", narrowed by {narrowing}" if layered else ""
        custom["access_aces"] = [d.shown() for d in dacl.deciders]
        if narrowed:
            custom["access_narrowed"] = [role_of(sid) for sid in narrowed]
        if dacl.unknown:  # (denies whose holders no directory sync read: every person refused)
            custom["access_unknown_sids"] = list(dacl.unknown)
    else:
        roles_from = roles_source(layers, obj.outside)
    if roles_from is not None:
        custom["access_roles_from"] = roles_from
    dataset = meta.get("dataset_name")
    return Fields(
        title=document_title(meta, obj.name, title),
        dataset_name=dataset if isinstance(dataset, str) and dataset else dataset_name,
        metadata=custom,
        roles=list(roles),
        version=obj.outside.version,
        also=also,
        denied=denied,
    )


def stamp(chunk: dict[str, Any], fields: Fields, marks: Mapping[str, Any], source: str) -> None:
    """Set on ``chunk`` what its document's layers give it (``marks``: its own, from the
    reader), replacing what an earlier version of them gave."""
    chunk["document_title"] = fields.title
    chunk["dataset_name"] = fields.dataset_name
    chunk["metadata"] = {**fields.metadata, **marks} if marks else dict(fields.metadata)
    for key, value in (
        ("access_roles", fields.roles),
        ("access_also", fields.also),
        ("access_denied", fields.denied),
        ("source_name", source),
        ("permissions_version", fields.version),
    ):
        if value:
            chunk[key] = value
        else:
            chunk.pop(key, None)


def build_chunks(
    obj: SourceObject,
    *,
    knowledge_id: str,
    dataset_name: str,
    url: str | None = None,
    options: ChunkOptions | None = None,
    now: datetime | None = None,
    tz: tzinfo = UTC,
    tenant: str = DEFAULT_TENANT,
    source: str = "",
) -> list[dict[str, Any]]:
    """The chunk documents of one object (``source``: the name of the source it came from, so
    a run prunes only its own source's documents). Raises DocumentError when it cannot be
    indexed.

    Each chunk keeps what its bytes gave (``from_bytes``: the reader's facts, the front
    matter, the title and the chunk's marks, none of it searched), so a change of its roles
    alone is re-stamped from the index without reading the document again
    (``indexer.restamp``)."""
    title = bytes_title(obj.text, obj.own_title)
    fields = document_fields(obj, title, dataset_name, tz)
    texts = [
        (content, {**marks, "headings": list(path)} if path else marks)
        for text, marks in _sections(obj)
        for content, path in chunk_sections(text, options)
    ]
    if not texts:
        raise DocumentError("no text to index")
    doc_id = document_id(knowledge_id, obj.identity, tenant)
    from_bytes = {
        "info": {k: metadata_value(v, tz) for k, v in obj.info.items()},
        "front_matter": {k: metadata_value(v, tz) for k, v in obj.front_matter.items()},
        "title": title,
    }
    indexed_at = (now or datetime.now(UTC)).isoformat()
    docs: list[dict[str, Any]] = []
    for position, (content, marks) in enumerate(texts, start=1):
        doc: dict[str, Any] = {
            "chunk_id": chunk_id(doc_id, position),
            "document_id": doc_id,
            "tenant": tenant,
            "knowledge_id": knowledge_id,
            "content": content,
            "document_name": obj.name,
            "source_file_url": url or obj.uri,
            "segment_position": position,
            "segment_count": len(texts),
            "content_seg": segment(content),
            "content_hash": hashlib.sha256(content.encode()).hexdigest(),
            "source_etag": obj.etag,
            "indexed_at": indexed_at,
            "from_bytes": {**from_bytes, "marks": marks},
        }
        stamp(doc, fields, marks, source)
        docs.append(doc)
    return docs
