"""The last listing kept beside the watcher, so that a watcher started again finds what changed
while none ran in seconds, before its whole re-listing (which still follows, as always).

**What is kept.** When a whole re-listing of a folder begins, the watcher walks it for stamps
only (nothing is read): each folder's modification and change times, each file's size and
modification and change times (a sidecar, a rules file inside the folder and a link are files
here too), and the rules file in force. Once that re-listing has settled everything without a
failure, the stamps are stored; a change after the walk began is seen again next time (the
kept listing is never newer than what was settled). A bucket (or a share) has no stamps kept —
its events wait in its queue — only the rules in force.

**Where.** In Elasticsearch, in the tenant's runs index beside the source's lease and status
record (one document per knowledge base, source and shard, compressed; ~155 KB at 10,000
files). A watcher's successor may start on another node with nothing of its predecessor's
disk (a rollout, a node lost), but it always reaches the cluster it writes to; the chart
needs no volume for it.

**At the start.** The new watcher reads it back, walks the folder again and hands over the
keys whose stamps differ (a folder that appeared or went: the folder's key, everything below
it) to be settled as heard events are — narrowing first; a rules file that differs from the
kept one is held from the index as a rules edit is. A record that is absent, unreadable, of
another folder (path, device, inode) or too large to be worth it: the watcher starts as it
always did, with the whole re-listing alone. The record is only ever a hint: the whole
re-listing follows either way, so a wrong record makes a start slower, never wider.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import stat
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from indexer.permissions import AclRules
from indexer.permissions.rules import Rule
from indexer.sources import LocalSource, Source
from indexer.watch.events import document_key
from retrieval_svc.words import say

log = logging.getLogger("indexer.watch.watcher")

STATE = "watch-state"  # the record's kind (not a run, a watcher's status or a lease)
MAX_FILES = 500_000  # past this, a folder's stamps are not kept (the start re-lists alone)
MAX_FOLDERS = MAX_FILES  # (and past this many folders)
# A kept listing's entries are counted by their quotes before it is parsed (a file's name and
# stamp have four, a folder's key and stamp four): a record forged to inflate into millions of
# tiny entries would take gigabytes to parse (4 million: 0.8 GB) — refused unparsed instead.
MAX_QUOTES = 4 * (MAX_FILES + MAX_FOLDERS)
MAX_STORED = 64 * 1024 * 1024  # the compressed record's bound, read or written
MAX_RAW = 256 * 1024 * 1024  # its bound once inflated (a record that inflates past it: refused)
MAX_KEYS = 20_000  # differences past which a start is left to the whole re-listing

Folders = dict[str, tuple[str, dict[str, str]]]  # folder key → (its stamp, file name → stamp)


@dataclass(slots=True)
class Listing:
    """A folder's stamps: which folder (path, device, inode) and what was in it."""

    root: str
    device: int
    inode: int
    folders: Folders = field(default_factory=dict)
    files: int = 0


def walk(root: Path) -> Listing | None:
    """The stamps of everything below ``root`` (no link followed, nothing read); None when
    the folder cannot be looked at or holds more than ``MAX_FILES``."""
    try:
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    listing = Listing(str(root), st.st_dev, st.st_ino)
    todo = [("", str(root), st)]
    while todo:
        key, path, here = todo.pop()
        files: dict[str, str] = {}
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        est = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # (gone since it was listed)
                    below = f"{key}/{entry.name}" if key else entry.name
                    if stat.S_ISDIR(est.st_mode):
                        todo.append((below, entry.path, est))
                    else:
                        files[entry.name] = _stamp(est)
        except OSError:
            listing.folders[key] = ("unlisted", {})  # (differs from any stamp: looked at)
            continue
        listing.folders[key] = (f"{here.st_mtime_ns:x}-{here.st_ctime_ns:x}", files)
        listing.files += len(files)
        if listing.files > MAX_FILES or len(listing.folders) > MAX_FOLDERS:
            return None
    return listing


def _stamp(st: os.stat_result) -> str:
    return f"{st.st_mtime_ns:x}-{st.st_size:x}-{st.st_ctime_ns:x}-{stat.S_IFMT(st.st_mode):o}"


def changed(before: Listing, now: Listing) -> set[str] | None:
    """The keys to look at for what changed from ``before`` to ``now``: a folder that
    appeared or went, by its own key; a file added, removed or changed, by its document's
    key. None: not the same folder, or more differences than a look at each is worth."""
    if (before.root, before.device, before.inode) != (now.root, now.device, now.inode):
        return None
    keys: set[str] = set()
    for folder in before.folders.keys() | now.folders.keys():
        was, is_now = before.folders.get(folder), now.folders.get(folder)
        if was is None or is_now is None or "unlisted" in (was[0], is_now[0]):
            if folder:
                keys.add(folder)
            continue
        if was == is_now:
            continue
        (_, files_was), (_, files_now) = was, is_now
        for name in files_was.keys() | files_now.keys():
            if files_was.get(name) != files_now.get(name):
                keys.add(document_key(f"{folder}/{name}" if folder else name))
        if len(keys) > MAX_KEYS:
            return None
    return keys if len(keys) <= MAX_KEYS else None


def rules_record(rules: AclRules | None) -> dict[str, Any] | None:
    """A rules file as kept (enough to judge what a later edit of it changed)."""
    if rules is None:
        return None
    return {
        "unmatched": rules.unmatched,
        "case": rules.case,
        "exclude": list(rules.exclude),
        "rules": [[list(r.patterns), list(r.roles), r.override] for r in rules.rules],
    }


def rules_from(record: Any, path: str) -> AclRules | None:
    """The rules kept by ``rules_record``; ValueError when the record is not one."""
    if record is None:
        return None
    if not isinstance(record, dict) or record.get("unmatched") not in ("public", "refuse"):
        raise ValueError("not a rules record")
    case = record.get("case")
    if case not in ("sensitive", "insensitive"):
        raise ValueError("not a rules record")
    rules = []
    for number, item in enumerate(record.get("rules") or [], 1):
        patterns, roles, override = item
        if not all(isinstance(v, str) for v in [*patterns, *roles]):
            raise ValueError("not a rules record")
        rules.append(Rule(number, tuple(patterns), tuple(roles), bool(override)))
    exclude = tuple(str(v) for v in record.get("exclude") or ())
    return AclRules(path, record["unmatched"], tuple(rules), case=case, exclude=exclude)


def state_id(status_id: str) -> str:
    """The record's id, from the watcher's status record's (``<kb>@watch-<digest>[shard]``)."""
    return status_id.replace("@watch-", "@watch-state-", 1)


@dataclass(slots=True)
class Kept:
    """What a watcher read back at its start."""

    listing: Listing
    rules: AclRules | None
    at: float


async def store(
    es: AsyncElasticsearch, index: str, doc_id: str, listing: Listing, rules: AclRules | None
) -> None:
    """Keep ``listing`` (and the rules in force when it was walked)."""
    body = json.dumps(listing.folders, separators=(",", ":")).encode("utf-8", "surrogatepass")
    packed = base64.b64encode(zlib.compress(body, 6)).decode("ascii")
    if len(packed) > MAX_STORED:
        return
    record = {
        "kind": STATE,  # (no knowledge_id: never read as a run of the knowledge base)
        "root": listing.root,
        "device": listing.device,
        "inode": listing.inode,
        "files": listing.files,
        "rules": rules_record(rules),
        "rules_path": rules.path if rules is not None else "",
        "at": time.time(),
        "listing": packed,
    }
    await es.index(index=index, id=doc_id, document=record)


async def read(es: AsyncElasticsearch, index: str, doc_id: str) -> Kept | None:
    """The kept listing, or None (absent, or unreadable: said, and the start re-lists)."""
    found = await es.options(ignore_status=404).get(index=index, id=doc_id)
    body = found.body if isinstance(found.body, dict) else {}
    if not body.get("found"):
        return None
    try:
        return _parse(body.get("_source") or {})
    except Exception as exc:  # (a record from another version, or forged: not trusted)
        log.warning(say("listing_not_read", why=exc))
        return None


def _parse(record: dict[str, Any]) -> Kept:
    if record.get("kind") != STATE:
        raise ValueError("not a kept listing")
    packed = record["listing"]
    if not isinstance(packed, str) or len(packed) > MAX_STORED:
        raise ValueError("the listing is not text, or too large")
    inflate = zlib.decompressobj()
    raw = inflate.decompress(base64.b64decode(packed, validate=True), MAX_RAW)
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("the listing is too large, or cut short")
    if raw.count(b'"') > MAX_QUOTES:
        raise ValueError("the listing holds more entries than a kept one can")
    data = json.loads(raw.decode("utf-8", "surrogatepass"))
    if not isinstance(data, dict):
        raise ValueError("the listing is not an object")
    folders: Folders = {}
    for key, value in data.items():
        stamp, files = value
        if not isinstance(stamp, str) or not isinstance(files, dict):
            raise ValueError("a folder's stamps cannot be read")
        if not all(isinstance(s, str) for s in files.values()):
            raise ValueError("a file's stamp cannot be read")
        folders[str(key)] = (stamp, files)
    root, device, inode = record["root"], record["device"], record["inode"]
    if not isinstance(root, str) or not isinstance(device, int) or not isinstance(inode, int):
        raise ValueError("which folder it was cannot be read")
    listing = Listing(root, device, inode, folders, sum(len(f) for _, f in folders.values()))
    if listing.files > MAX_FILES or len(folders) > MAX_FOLDERS:
        raise ValueError("the listing holds more entries than a kept one can")
    rules = rules_from(record.get("rules"), str(record.get("rules_path") or ""))
    at = record.get("at")
    return Kept(listing, rules, float(at) if isinstance(at, int | float) else 0.0)


@dataclass(slots=True)
class Since:
    """What changed since the kept listing: the keys to look at, and the rules then (when
    the rules in force now differ from them)."""

    keys: set[str]
    rules_changed: bool
    rules_before: AclRules | None
    kept_at: float


async def since_kept(
    es: AsyncElasticsearch, index: str, doc_id: str, source: Source, rules: AclRules | None
) -> Since | None:
    """What changed in ``source`` since its kept listing (a bucket's: its rules alone); None
    where the start re-lists alone (nothing kept, unreadable, another source, too many
    differences)."""
    kept = await read(es, index, doc_id)
    if kept is None:
        return None
    if isinstance(source, LocalSource):
        now = await asyncio.to_thread(walk, source.root)
        if now is None:
            return None
        keys = changed(kept.listing, now)
        if keys is None:
            return None
    elif kept.listing.root != source.description or kept.listing.folders:
        return None  # (another source's record)
    else:
        keys = set()
    then = kept.rules.fingerprint() if kept.rules is not None else None
    rules_changed = then != (rules.fingerprint() if rules is not None else None)
    return Since(keys, rules_changed, kept.rules, kept.at)


async def walk_source(source: Source) -> Listing | None:
    """A folder source's stamps; a bucket's (or share's) none — its events wait in its queue —
    so only the rules in force are kept for it: a rules edit made while no watcher ran is
    then held at the start, as a folder's is."""
    if not isinstance(source, LocalSource):
        return Listing(source.description, 0, 0)
    return await asyncio.to_thread(walk, source.root)


async def keep(
    es: AsyncElasticsearch, index: str, doc_id: str, listing: Listing, rules: AclRules | None
) -> None:
    """``store``, a failure said and passed over (the next start re-lists whole)."""
    try:
        await store(es, index, doc_id, listing, rules)
    except Exception as exc:
        log.warning(say("listing_not_kept", kind=type(exc).__name__, why=exc))


async def at_start(
    es: AsyncElasticsearch, index: str, doc_id: str, source: Source, rules: AclRules | None
) -> Since | None:
    """What changed in a source since its kept listing (a bucket's: its rules), said; None
    where the start re-lists alone (nothing kept, unreadable, Elasticsearch away)."""
    try:
        since = await since_kept(es, index, doc_id, source, rules)
    except Exception as exc:  # (Elasticsearch away: the whole re-listing alone)
        log.warning(say("listing_kept_not_read", kind=type(exc).__name__, why=exc))
        return None
    if since is not None:
        at = time.strftime("%H:%M:%S", time.localtime(since.kept_at))
        more = say("watch_since_rules") if since.rules_changed else ""
        now = time.strftime("%H:%M:%S")
        log.warning(say("watch_since_kept", now=now, at=at, keys=len(since.keys), rules=more))
    return since
