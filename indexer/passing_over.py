"""What a listing passes over, and why: hidden files and sidecars on purpose (uncounted);
lock, temporary and system files, excluded keys, keys that cannot be told from a neighbour
and unsupported types counted by reason, with a few names each — never a silent skip."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from pathlib import PurePosixPath

from wcmatch import glob as wcglob

from indexer.parsers import supported
from indexer.permissions.rules import GLOB_FLAGS

SIDECAR_SUFFIX = ".meta.json"


def indexable(key: str) -> bool:
    """Whether a key names a document (not a sidecar, not hidden, a supported type)."""
    return not by_design(key) and supported(key)


# Files an office share always holds and nobody wants indexed: Word's and Excel's lock files
# (~$报告.docx), LibreOffice's (.~lock.报告.docx#), Word's temporary saves (~WRL0001.tmp), and
# the folder files of Windows and macOS. Passed over and counted, never failed.
_SCRATCH = (
    re.compile(r"^~\$"),
    re.compile(r"^\.~lock\..*#$"),
    re.compile(r"^~WRL\d*\.tmp$", re.IGNORECASE),
    re.compile(r"^(Thumbs\.db|desktop\.ini|\.DS_Store)$", re.IGNORECASE),
)
SCRATCH_REASON = "a lock, temporary or system file"


def scratch(key: str) -> bool:
    """Whether ``key`` names a lock, temporary or folder-system file (see ``_SCRATCH``)."""
    name = key.rsplit("/", 1)[-1]
    return any(p.search(name) for p in _SCRATCH)


def by_design(key: str) -> bool:
    """Hidden files and sidecars: passed over on purpose, never reported."""
    return key.rsplit("/", 1)[-1].startswith(".") or key.endswith(SIDECAR_SUFFIX)


def odd_key(key: str) -> str | None:
    """Why an object key cannot be indexed as it is, else None: an empty, ``.`` or ``..``
    folder (``docs//a.md``, ``./a.md``) names the same path as another key to every folder
    rule and every reader, so the object is refused, never merged with its neighbour."""
    if any(part in ("", ".", "..") for part in key.split("/")):
        return "an empty, '.' or '..' folder in the key (docs//a.md): rename the object"
    return None


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class PassedOver:
    """What a listing passed over, by reason (``unsupported .vsdx``, ``not a regular file``),
    with the first few names of each: never a silent skip (issue #34 §1, #37 §3)."""

    EXAMPLES = 5

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}
        self._exclude: list[tuple[re.Pattern[str], str, Callable[[str], str]]] = []

    def excluding(
        self, patterns: list[str], origin: str, fold: Callable[[str], str] | None = None
    ) -> None:
        """Pass over the keys ``patterns`` match (globs as in a rules file: ``**``, ``*``,
        ``{a,b}``; compared in NFC, or as ``fold`` makes keys and globs — a rules file's
        own comparison, case-folded under ``case: insensitive``), counted as excluded by
        ``origin``."""
        fold = fold or _nfc
        for pattern in patterns:
            if not pattern.strip() or pattern.startswith("/"):
                raise ValueError(
                    f"{origin}: {pattern!r} is empty or starts with '/' (globs match keys "
                    "below the source: write archive/** for SOURCE/archive/…)"
                )
            included, _ = wcglob.translate([fold(pattern)], flags=GLOB_FLAGS)
            self._exclude.append((re.compile("|".join(included)), f"excluded ({origin})", fold))

    def unwanted(self, key: str) -> bool:
        """Count ``key`` if it is a lock, temporary or system file, or excluded; whether it
        was."""
        if scratch(key):
            self.add(key, SCRATCH_REASON)
            return True
        for regex, reason, fold in self._exclude:
            if regex.match(fold(key)):
                self.add(key, reason)
                return True
        return False

    def add(self, key: str, reason: str) -> None:
        """Count ``key`` as passed over for ``reason``."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        names = self.examples.setdefault(reason, [])
        if len(names) < self.EXAMPLES:
            names.append(key)

    def unsupported(self, key: str) -> bool:
        """Count ``key`` if it is a document of a type the indexer does not read; whether
        it was (hidden files and sidecars are passed over on purpose, uncounted)."""
        if by_design(key) or supported(key):
            return False
        suffix = PurePosixPath(key).suffix.lower()
        self.add(key, f"unsupported {suffix}" if suffix else "unsupported (no suffix)")
        return True
