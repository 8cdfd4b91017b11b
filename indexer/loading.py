"""What a run indexes and how, and one document of it read: its bytes, its metadata layers,
what its roles come from outside its bytes (folder rule, roles tag), and the settings its
chunks are made with. ``indexer.pipeline`` runs these over a whole source."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from string import Formatter
from typing import Any
from zoneinfo import ZoneInfo

from indexer.budget import Budget
from indexer.chunking import ChunkOptions
from indexer.documents import DocumentError
from indexer.formats.base import OcrMode
from indexer.permissions import AclRules, Outside, TagError, roles_from_tag, versioned
from indexer.reading import ChunkSettings, document_chunks
from indexer.shards import Shard
from indexer.sources import ObjectRef, Source
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.settings import DEFAULT_TIMEZONE

URL_FIELDS = frozenset({"key", "uri", "bucket", "name"})
NOBODY = "its DACL lets no one read its data: not indexed"
NOBODY_SHARE = "its DACL and the ACL of share {share} let no one read its data: not indexed"


@dataclass(frozen=True, slots=True)
class IndexOptions:
    """What to index into, and how."""

    knowledge_id: str
    alias: str
    tenant: str = DEFAULT_TENANT
    dataset_name: str = ""
    chunk: ChunkOptions = field(default_factory=ChunkOptions)
    url_template: str | None = None
    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)
    prune: bool = False
    # This source is the knowledge base's only one (``--prune`` given): it prunes whatever it
    # does not hold, and takes over documents another source wrote.
    sole: bool = False
    shard: Shard | None = None  # only the objects of this shard (--shard I/N)
    force: bool = False
    dry_run: bool = False
    batch_size: int = 500
    batch_bytes: int = 32 * 1024 * 1024
    concurrency: int = 4
    timezone: str = DEFAULT_TIMEZONE  # where date-only metadata values are read (RSVC_TIMEZONE)
    budget: Budget = field(default_factory=Budget)  # what one document may cost
    ocr: OcrMode = "auto"  # pages without text and images: read by OCR (auto), never, always
    # Worker processes that parse under the budget's time and memory limits (the CLI's
    # default); 0: threads of this process, with the size limits only (a library caller).
    workers: int = 0
    acl_rules: AclRules | None = None  # folder rules (--acl-rules)
    roles_tag: str | None = None  # the object tag that holds roles (--roles-tag)
    # The name each document records of the source it came from (--source-name; the run
    # takes the source's own description when empty): a run prunes only its source's.
    source_name: str = ""
    # Awaited before every write: raises when this writer no longer holds its source's lease
    # (``indexer.lease``), so nothing lands after another writer took over. None: nothing is
    # fenced (a library caller, a dry run).
    guard: Callable[[], Awaitable[None]] | None = field(default=None, compare=False, repr=False)
    # The version each write carries (``Lease.version``: the lease's number, then a count of
    # writes), so Elasticsearch refuses a write of an older holder over a newer one's. None:
    # written without one (a library caller, a dry run).
    stamp: Callable[[], int] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.url_template is not None:
            names = {f for _, f, _, _ in Formatter().parse(self.url_template) if f is not None}
            unknown = names - URL_FIELDS
            if unknown:
                allowed = ", ".join(sorted(URL_FIELDS))
                raise ValueError(f"--url-template uses {sorted(unknown)}; allowed: {allowed}")


async def guarded(options: IndexOptions) -> None:
    """Before a write: ``options.guard`` (the lease still ours), if any."""
    if options.guard is not None:
        await options.guard()


def _url(options: IndexOptions, ref: ObjectRef, bucket: str) -> str:
    if options.url_template is None:
        return ref.uri
    name = ref.key.rsplit("/", 1)[-1]
    return options.url_template.format(key=ref.key, uri=ref.uri, bucket=bucket, name=name)


def chunk_settings(options: IndexOptions) -> ChunkSettings:
    """What turning a document of this run into chunks needs (sent to the workers once per
    document: small, the manifest stays here)."""
    return ChunkSettings(
        knowledge_id=options.knowledge_id,
        dataset_name=options.dataset_name or options.knowledge_id,
        tz=ZoneInfo(options.timezone),
        chunk=options.chunk,
        tenant=options.tenant,
        budget=options.budget,
        ocr=options.ocr,
        source=options.source_name,
    )


Read = tuple[ObjectRef, bytes, "Layers", str, Outside]


def manifest_line(options: IndexOptions, ref: ObjectRef) -> dict[str, Any]:
    """The object's manifest metadata (its ``path`` aside)."""
    line = options.manifest.get(ref.key) or options.manifest.get(ref.uri) or {}
    return {k: v for k, v in line.items() if k != "path"}


def outside_of(source: Source, ref: ObjectRef, options: IndexOptions) -> Outside:
    """What the object's roles come from outside its bytes: its folder rule and roles tag
    (blocking I/O when tags are read: run it in a thread). Raises DocumentError when the tag
    cannot be read: such a document fails, it is never published."""
    rules, name = options.acl_rules, options.roles_tag
    tag: tuple[str, ...] | None = None
    if name:
        try:
            tags = source.tags(ref)
        except Exception as exc:  # a read error fails the document, never publishes it
            raise DocumentError(f"tag {name} cannot be read: {type(exc).__name__}: {exc}") from exc
        if name in tags:
            try:
                tag = tuple(roles_from_tag(name, tags[name]))
            except TagError as exc:
                raise DocumentError(str(exc)) from None
    if isinstance(ref.dacl, str):  # (its access list could not be read: never published)
        raise DocumentError(ref.dacl)
    if ref.dacl is not None and ref.dacl.nobody:
        raise DocumentError(NOBODY_SHARE.format(share=ref.dacl.share) if ref.dacl.share else NOBODY)
    outside = Outside(
        dacl=ref.dacl,
        rule=rules.match(ref.key) if rules else None,
        rules_file=rules.path if rules else "",
        unmatched=rules.unmatched if rules else "",
        tag_name=name or "",
        tag=tag,
    )
    return versioned(outside, manifest_line(options, ref), ref.sidecar)


def read_document(
    source: Source, ref: ObjectRef, options: IndexOptions, outside: Outside | None = None
) -> Read:
    """Read one object and its metadata layers (blocking I/O: run it in a thread): the
    arguments of ``document_chunks`` but its settings. Its size is checked first."""
    options.budget.check_bytes(ref.size)
    if outside is None:
        outside = outside_of(source, ref, options)
    data = source.read(ref)
    layers, url = document_layers(source, ref, options)
    return ref, data, layers, url, outside


Layers = tuple[tuple[str, dict[str, Any]], ...]


def document_layers(source: Source, ref: ObjectRef, options: IndexOptions) -> tuple[Layers, str]:
    """The object's metadata layers beside its bytes (its sidecar and manifest line, with their
    names) and its URL (blocking I/O when it has a sidecar: run it in a thread)."""
    layers = (("sidecar", source.sidecar(ref)), ("manifest", manifest_line(options, ref)))
    bucket = ref.uri.split("/")[2] if "://" in ref.uri else ""
    return layers, _url(options, ref, bucket)


def load_document(
    source: Source, ref: ObjectRef, options: IndexOptions, outside: Outside | None = None
) -> list[dict[str, Any]]:
    """Read, parse and chunk one object in this process (blocking: run it in a thread)."""
    return document_chunks(*read_document(source, ref, options, outside), chunk_settings(options))
