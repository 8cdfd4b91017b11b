"""What a run does where its source cannot be read whole: a place the listing could not read
is a failure of the run, and the documents stored below it are withdrawn — their permission
sources cannot be read, so their older chunks might answer wider than the source now says —
never pruned as gone; and a document another source of the knowledge base wrote and still
holds is refused, never taken over."""

from __future__ import annotations

import os
from typing import Any

from elasticsearch import AsyncElasticsearch

from indexer.loading import IndexOptions
from indexer.report import Report
from indexer.sources import Source
from indexer.store import documents_below


def still_held(other: str, key: str) -> bool:
    """Whether the source ``other`` (a name a document records) may still hold ``key``. Only
    a folder this machine sees, with nothing at the key any more, does not (its files moved
    into another folder): this source takes the document over. Anything else may — the key
    still there; a bucket; a name given with ``--source-name``; a folder this machine does
    not see at all, which is as likely another machine's (another pod's mount) as a folder
    moved away, so the document stays its writer's and this source's is refused, naming it
    (``another_source``: ``--source-name`` for a folder that really moved)."""
    if not os.path.isabs(other) or not os.path.isdir(other):
        return True
    return os.path.lexists(os.path.join(other, *key.split("/")))


def another_source(other: str, this: str) -> str:
    """Why a document another source of the knowledge base wrote is not written by this one."""
    return (
        f"already indexed from another source of this knowledge base ({other}): two sources "
        f"would write one document; index one into another knowledge base, or, if {other} is "
        f"this source ({this}) under its old name, run with --source-name '{other}' (or once "
        "with --prune, which makes this source the knowledge base's only one)"
    )


async def what_was_not_listed(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    report: Report,
    has_chunks: bool,
) -> set[str]:
    """Record each place the listing could not read as a failure of the run, and withdraw the
    documents of this source stored below a folder or at a key it could not read (of this
    run's shard only); their ids."""
    failures = source.failures
    for failure in failures:
        report.fail(failure.shown, failure.reason)
    names: list[dict[str, Any]] = [
        {"prefix": {"document_name": f.key.rstrip("/") + "/"}}
        if f.scope == "folder" and f.key
        else {"term": {"document_name": f.key}}
        for f in failures
        if f.scope in ("folder", "key")
    ]
    if not names or not has_chunks:
        return set()
    if any(f.scope == "folder" and not f.key for f in failures):  # (the root itself)
        names = [{"match_all": {}}]
    below = await documents_below(
        es,
        options.alias,
        options.tenant,
        options.knowledge_id,
        (options.source_name, source.location),
        names,
    )
    shard = options.shard
    for doc_id, name in sorted(below.items(), key=lambda kv: kv[1]):
        if shard is not None and not shard.holds(doc_id):
            continue
        why = next((f for f in failures if f.covers(name)), failures[0])
        report.withdraw(name, doc_id, f"{why.shown} {why.reason}")
    return set(below)
