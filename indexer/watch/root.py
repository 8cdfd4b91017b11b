"""A watched folder's own identity, looked at again and again as at the start: the device and
inode of its root, never through a link.

A share re-mounted, a deploy that renames the folder away and an identical copy into its place,
an unmount: the file-system watch stays on the old inode and hears nothing more, so the
watcher must notice itself — it watches the new folder, re-lists it whole and names what
happened in its health record. A root that became a symbolic link is not followed (the
listing refuses it: ``LocalSource``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def identity(root: Path, given: Path | None = None) -> tuple[int, int] | str:
    """The folder's (device, inode), or why it has none now (gone, a link, not a folder, or
    the path it was ``given`` as leads elsewhere now)."""
    if given is not None and given != root and (now := os.path.realpath(given)) != str(root):
        return f"not where {given} leads now ({now}): start the watcher again to follow it"
    try:
        st = os.lstat(root)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or type(exc).__name__}"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link now (not followed)"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder now"
    return (st.st_dev, st.st_ino)


class RootWatch:
    """The root's identity as last seen; ``changed`` says when it is not the same any more."""

    def __init__(self, root: Path, given: Path | None = None) -> None:
        self.root, self.given = root, given
        self.last = identity(root, given)

    def changed(self) -> tuple[int, int] | str | None:
        """The root's identity (or its problem) when it differs from the last look; None when
        it does not."""
        now = identity(self.root, self.given)
        if now == self.last:
            return None
        self.last = now
        return now

    @property
    def problem(self) -> str:
        """Why the root cannot be watched now ("" when it can)."""
        return self.last if isinstance(self.last, str) else ""
