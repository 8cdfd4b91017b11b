"""A folder on disk (a local disk or a mounted share) as a source.

Symbolic links are never followed, wherever they are: a link to a file or to a folder, inside
the folder or out of it, is passed over and named, and its target is indexed where it lies —
under its own key, with the roles of its own place — or not at all. A link cannot publish what
it points at under a more open folder, and a link whose target changes changes nothing. Files
are opened one folder at a time without following a link (``O_NOFOLLOW``), so a file or a
folder swapped for a link between the listing and the read is refused too; a sidecar that is a
link fails its document (its roles cannot be read), never publishes it without them.

A folder that cannot be listed (no permission, an I/O error of the share) is a listing failure,
never an empty folder: the run names it and fails, and nothing below it is pruned. The folder
itself unreadable (a share that went away) is an outage of the whole source: the run fails
and prunes nothing, as for a bucket whose listing fails.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexer.documents import DocumentError
from indexer.metadata_limits import MAX_SIDECAR_BYTES
from indexer.passing_over import SIDECAR_SUFFIX, PassedOver, by_design
from indexer.sources.base import ListingFailure, ObjectRef, parse_sidecar

LINK_REASON = "a symbolic link: not followed"
_LINK_STAMP = "link"  # a sidecar that is a link: its documents' roles cannot be read


def _stamp(path: Path) -> str:
    """A sidecar's modification time and size, the link itself when it is one ("" when
    there is none)."""
    try:
        st = path.lstat()
    except OSError:
        return ""
    if stat.S_ISLNK(st.st_mode):
        return f"{_LINK_STAMP}-{st.st_mtime_ns:x}"
    return f"{st.st_mtime_ns:x}-{st.st_size:x}"


def open_below(root: Path, key: str) -> int:
    """A descriptor of ``root/key`` opened for reading without following a link on the way
    (each folder opened below the last, the file with ``O_NOFOLLOW``); ``OSError`` with
    ``ELOOP`` (or ``ENOTDIR``) where a link stands, and ``DocumentError`` when it is not a
    regular file."""
    parts = key.split("/")
    # (the root itself too: a share's folder swapped for a link is not followed either)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = below
        # (O_NONBLOCK: a FIFO put in the file's place never hangs the read)
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DocumentError(f"{key} is not a regular file")
    return fd


def read_below(root: Path, key: str, limit: int | None = None) -> bytes:
    """The bytes of ``root/key`` (at most ``limit``), read as ``open_below`` opens it; a link
    on the way is a DocumentError naming the policy."""
    try:
        fd = open_below(root, key)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise DocumentError(f"{key} is a symbolic link: links are never followed") from None
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read() if limit is None else f.read(limit)


class LocalSource:
    """A folder on disk; the version (ETag) of a file is its modification time and size."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise NotADirectoryError(f"{root} is not a folder")
        self.given = Path(os.path.abspath(root))  # (as given: perhaps through a link)
        self.root = root.resolve()
        self.description = str(self.root)
        self.location = self.root.as_uri() + "/"  # (where its objects' addresses start)
        self.passed_over = PassedOver()
        self.failures: list[ListingFailure] = []

    def list(self) -> Iterator[ObjectRef]:
        """The folder's documents, streamed folder by folder (memory flat however many
        files), in name order. Links are passed over (see the module); FIFOs, devices,
        sockets, names that are not UTF-8 and files that vanish are passed over with their
        reason; a folder or a file that cannot be read is a listing failure."""
        if self.root.is_symlink():  # (replaced by a link since the start: an outage)
            why = "the folder is a symbolic link now: not followed"
            self.failures.append(ListingFailure("", why, "rest"))
            return iter(())
        if why := self.elsewhere():  # (its link swapped to another folder: an outage)
            self.failures.append(ListingFailure("", why, "rest"))
            return iter(())
        return self._walk(self.root)

    def elsewhere(self) -> str:
        """Why the folder as given (``/srv/current``, a link a deploy swaps) leads to another
        folder than the one resolved at the start ("" when it does not): this source is no
        longer what was asked for, so nothing of it is listed, looked at or written — a
        source started again follows the link."""
        if self.given == self.root:
            return ""
        now = os.path.realpath(self.given)
        if now == str(self.root):
            return ""
        return f"{self.given} leads to {now} now, not to {self.root}: start again to follow it"

    def under(self, folder: str) -> Iterator[ObjectRef]:
        """The documents below the folder ``folder`` (a key), listed as ``list`` lists them
        (nothing when it is not a folder, or a link to one)."""
        if why := self.elsewhere():
            raise FileNotFoundError(why)
        top = self.root / folder
        if not folder or top.is_symlink() or not top.is_dir():
            return iter(())
        return self._walk(top)

    def look(self, key: str) -> ObjectRef | None:
        """The object at ``key`` now, as a listing would give it; None where a listing would
        give nothing (gone, a link, passed over, not a file)."""
        if not key or any(part in ("", ".", "..") for part in key.split("/")):
            return None
        if why := self.elsewhere():  # (never "gone": an outage, tried again)
            raise FileNotFoundError(why)
        return self._ref(self.root / key)

    def _walk(self, top: Path) -> Iterator[ObjectRef]:
        def unlisted(exc: OSError) -> None:
            where = Path(exc.filename) if exc.filename else self.root
            if where == self.root:  # (the whole source: an outage, like a bucket's)
                self.failures.append(ListingFailure("", self._why(exc), "rest"))
                return
            self.failures.append(ListingFailure(self._key(where), self._why(exc), "folder"))

        for folder, subfolders, files in os.walk(top, onerror=unlisted, followlinks=False):
            here = Path(folder)
            for name in list(subfolders):
                if (here / name).is_symlink():
                    subfolders.remove(name)
                    files.append(name)  # (named with the links to files, in name order)
            subfolders.sort()
            for name in sorted(files):
                if (ref := self._ref(here / name)) is not None:
                    yield ref

    @staticmethod
    def _why(exc: OSError) -> str:
        return f"cannot be listed: {type(exc).__name__}: {exc.strerror or exc}"

    def _key(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _ref(self, path: Path) -> ObjectRef | None:
        key = self._key(path)
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            shown = key.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            self.passed_over.add(shown, "the name is not valid UTF-8")
            return None
        if self.passed_over.unwanted(key) or by_design(key):
            return None
        try:
            st = path.lstat()
        except FileNotFoundError:  # (gone since the folder was listed: gone)
            return None
        except OSError as exc:  # (it is there, but what it is cannot be told)
            self.failures.append(ListingFailure(key, self._why(exc), "key"))
            return None
        if stat.S_ISLNK(st.st_mode):
            self.passed_over.add(key, LINK_REASON)
            return None
        if self.passed_over.unsupported(key):
            return None
        if not stat.S_ISREG(st.st_mode):
            self.passed_over.add(key, "not a regular file (a FIFO, device or socket)")
            return None
        return ObjectRef(
            key=key,
            uri=path.as_uri(),
            # Modification time and size, as rsync compares: listing never reads the files,
            # and each is read once, when it has changed.
            etag=f"{st.st_mtime_ns:x}-{st.st_size:x}",
            size=st.st_size,
            identity=f"local:{key}",  # moving the folder keeps document ids
            sidecar=_stamp(path.with_name(path.name + SIDECAR_SUFFIX)),
        )

    def read(self, ref: ObjectRef) -> bytes:
        return read_below(self.root, ref.key)

    def tags(self, ref: ObjectRef) -> dict[str, str]:  # noqa: ARG002
        return {}  # (files have no tags: the CLI refuses --roles-tag for a folder)

    def sidecar(self, ref: ObjectRef) -> dict[str, Any]:
        name = ref.key + SIDECAR_SUFFIX
        try:
            # (at most one byte past the bound is read)
            data = read_below(self.root, name, MAX_SIDECAR_BYTES + 1)
        except FileNotFoundError:
            return {}
        except DocumentError as exc:  # a link: the document's roles cannot be read
            raise DocumentError(f"sidecar {exc}; the document is not indexed") from None
        return parse_sidecar(data, name.rsplit("/", 1)[-1])

    def contains(self, path: Path) -> bool:
        """Whether ``path`` (as given, links not resolved) lies in this folder."""
        with contextlib.suppress(ValueError):
            Path(os.path.abspath(path)).relative_to(self.root)
            return True
        return False


def refuse_links_inside(source: object, files: dict[str, Path | None]) -> None:
    """An operator's file (the rules file, the manifest) is read as given, links and all (a
    Kubernetes ConfigMap is mounted as links); but one that lies in the folder it describes
    is refused when a link stands on its way there: whoever writes the share would choose
    what it says. Raises ValueError."""
    if not isinstance(source, LocalSource):
        return
    for option, path in files.items():
        if path is None or not source.contains(path):
            continue
        key = Path(os.path.abspath(path)).relative_to(source.root).as_posix()
        try:
            read_below(source.root, key, 0)
        except DocumentError:
            raise ValueError(
                f"{option} {path} lies in {source.description} and is reached through a "
                "symbolic link, which the indexer never follows: give the file itself"
            ) from None
