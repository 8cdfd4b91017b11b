"""A Windows share's own change notifications (SMB2 CHANGE_NOTIFY), as the watcher's events.

One handle on the source's folder, a CHANGE_NOTIFY request with the watch-tree flag asking for
names, sizes, writes, attributes **and security** (``FILE_NOTIFY_CHANGE_SECURITY``): a DACL
changed in Explorer (or by ``smbcacls``) names the file, which the watcher then looks at —
its new DACL read, its chunks re-stamped from the index without reading the text again. The
server keeps what changes while no request is outstanding on the handle, so nothing is lost
between two requests; what it drops when its buffer overflows (``STATUS_NOTIFY_ENUM_DIR``, an
empty answer) and what happens while the connection is down is found by the watcher's
periodic re-listing, as for a folder's events. A lost connection (the server restarted) is
opened again, with a growing pause, until the watcher stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from indexer.sources.smb import SmbSource
from indexer.watch.events import Heard, document_key
from retrieval_svc.words import say

log = logging.getLogger(__name__)

WATCH_TREE = 0x0001
# File and folder names, attributes, size, last write, creation, security, streams.
CHANGES = 0x01 | 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)


def _keys(actions: list[Any]) -> set[str]:
    """The documents the server's answer names (paths below the watched folder)."""
    keys = set()
    for action in actions:
        try:
            name = action["file_name"].get_value()
            if isinstance(name, bytes):
                name = name.decode("utf-16-le")
        except UnicodeError:  # (a name that is no UTF-16: its folder's re-listing names it;
            continue  # the batch's other names still heard, the watch not restarted)
        key = str(name).replace("\\", "/").strip("/")
        if key:
            keys.add(document_key(key))
    return keys


def _watch(source: SmbSource, put: Callable[[Heard], None], stopped: threading.Event) -> None:
    """Ask for changes until ``stopped``, opening the folder again after a failure."""
    from smbclient._io import SMBDirectoryIO
    from smbprotocol.change_notify import FileSystemWatcher

    failures = 0
    while not stopped.is_set():
        try:
            folder = SMBDirectoryIO(source._unc(""), mode="r", share_access="rwd",
                                    **source._kwargs())  # fmt: skip
            folder.open()
            try:
                failures = 0
                while not stopped.is_set():
                    watcher = FileSystemWatcher(folder.fd)
                    watcher.start(CHANGES, flags=WATCH_TREE)
                    while not watcher.response_event.wait(1.0):
                        if stopped.is_set():
                            with contextlib.suppress(Exception):
                                watcher.cancel()
                            return
                    actions = watcher.result or []
                    if keys := _keys(actions):
                        put(Heard(keys=keys, at=time.time()))
                    # (an empty answer: the server dropped what overflowed its buffer; the
                    # periodic re-listing finds it)
            finally:
                with contextlib.suppress(Exception):
                    folder.close()
        except Exception as exc:  # (the server gone, restarted, the session expired)
            pause = RETRY_S[min(failures, len(RETRY_S) - 1)]
            failures += 1
            log.warning(say("notifications_stopped", source=source.description,
                            kind=type(exc).__name__, seconds=f"{pause:.0f}"))  # fmt: skip
            with contextlib.suppress(Exception):
                source.close()
            stopped.wait(pause)


async def share_events(source: SmbSource, stop: asyncio.Event) -> AsyncIterator[Heard]:
    """The documents below the share folder that changed, a server answer at a time."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Heard] = asyncio.Queue()
    # A connection of its own: the outstanding request never waits behind (or holds up) the
    # listing's and the reads' requests on the source's connection.
    source = copy.copy(source)
    source._cache = {}
    stopped = threading.Event()

    def put(heard: Heard) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, heard)

    thread = threading.Thread(target=_watch, args=(source, put, stopped), daemon=True)
    thread.start()
    try:
        while not stop.is_set():
            try:
                heard = await asyncio.wait_for(queue.get(), timeout=1.0)
            except TimeoutError:
                continue
            while not queue.empty():  # (what arrived meanwhile, in one batch)
                heard.add(queue.get_nowait())
            yield heard
    finally:
        stopped.set()
