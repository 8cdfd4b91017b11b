"""Where documents come from. Local folders now; object storage follows the same shape."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexer.documents import DocumentError, SourceObject

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
SIDECAR_SUFFIX = ".meta.json"


def read_sidecar(path: Path) -> dict[str, Any]:
    """The ``<file>.meta.json`` beside ``path``, or ``{}``."""
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not sidecar.exists():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DocumentError(f"sidecar {sidecar.name} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DocumentError(f"sidecar {sidecar.name} must hold a JSON object")
    return data


def local_files(root: Path) -> Iterator[Path]:
    """Indexable files below ``root`` in a stable order."""
    for path in sorted(root.rglob("*")):
        if path.name.startswith(".") or path.suffix.lower() not in TEXT_SUFFIXES:
            continue
        if path.is_file():
            yield path


def load_local(path: Path, root: Path) -> SourceObject:
    """Read one local file into a SourceObject."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError("file is not UTF-8 text") from exc
    name = path.relative_to(root).as_posix()
    return SourceObject(
        uri=path.resolve().as_uri(),
        identity=f"local:{name}",
        name=name,
        text=text,
        etag=hashlib.md5(data, usedforsecurity=False).hexdigest(),
        metadata_layers=(read_sidecar(path),),
    )
