"""Where documents come from: local folders (``local``), S3 and Alibaba Cloud OSS
(``object_store``), Windows file shares over SMB (``smb``), each following ``Source``
(``base``)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from indexer.sources.base import ListingFailure, ObjectRef, Source, parse_sidecar
from indexer.sources.local import LINK_REASON, LocalSource
from indexer.sources.object_store import ObjectStoreOptions, ObjectStoreSource, s3_client
from indexer.sources.smb import SmbCredentials, SmbSource

__all__ = [
    "LINK_REASON",
    "ListingFailure",
    "LocalSource",
    "ObjectRef",
    "ObjectStoreOptions",
    "ObjectStoreSource",
    "SmbCredentials",
    "SmbSource",
    "Source",
    "open_source",
    "parse_sidecar",
    "s3_client",
]


def open_source(spec: str, options: ObjectStoreOptions | None = None) -> Source:
    """A source from ``oss://…``, ``s3://…``, ``smb://…``, ``file://…`` or a local path."""
    parsed = urlparse(spec)
    if parsed.scheme in ("s3", "oss"):
        return ObjectStoreSource(spec, options)
    if parsed.scheme == "smb":
        return SmbSource(spec)
    if parsed.scheme == "file":
        return LocalSource(Path(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ValueError(
            f"unsupported source {spec!r}: use oss://, s3://, smb://, file:// or a folder"
        )
    return LocalSource(Path(spec))
