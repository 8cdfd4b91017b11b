"""Narrowing from the index alone, without looking at the source: a rules edit (every stored
document whose rule now gives it something else is held), and many keys heard while a pass
runs (every stored document at them is held; looking at each would take a request or two per
key in a bucket). What a rules edit held is read again at once, by its keys (the watcher settles
them before the re-listing); the re-listing that follows writes everything else.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from elasticsearch import AsyncElasticsearch

from indexer.loading import IndexOptions, guarded
from indexer.permissions import AclRules, changed_below
from indexer.sources import Source
from indexer.store import refresh
from indexer.watch.hold import hold_documents
from indexer.watch.settle import BATCH, Settled, mine, stored_ids
from indexer.writing import Fence, fencing

READ_AGAIN = 20_000  # documents a rules edit held past which only the re-listing reads them


async def hold_keys(
    es: AsyncElasticsearch,
    source: Source,
    options: IndexOptions,
    keys: Iterable[str],
    fences: Sequence[Fence] = (),
) -> Settled:
    """Many keys heard while a pass runs, narrowed without looking at each (a request or two
    per key in a bucket): every document the index holds at them is held at once; the
    re-listing that follows the pass writes what is still there."""
    if not options.source_name:
        options = replace(options, source_name=source.description)
    done = Settled()
    found: dict[str, str] = {}
    ordered = sorted(set(keys))
    for i in range(0, len(ordered), BATCH):
        names = [
            clause
            for key in ordered[i : i + BATCH]
            for clause in (
                {"term": {"document_name": key}},
                {"prefix": {"document_name": key.rstrip("/") + "/"}},
            )
        ]
        found.update(await stored_ids(es, options, source, names))
    hold = {doc_id: name for doc_id, name in found.items() if mine(options, doc_id)}
    if hold and not options.dry_run:
        async with fencing(fences, hold):
            await guarded(options)
            await hold_documents(es, options.alias, list(hold), options.stamp)
            await refresh(es, options.alias)
    done.looked, done.held, done.narrowed_at = len(found), len(hold), time.time()
    return done


def _fate(rules: AclRules | None, name: str) -> tuple[Any, ...]:
    """What a rules file gives the object at ``name``: its rule's roles (and whether they
    override), or what an unmatched object gets."""
    if rules is None:
        return ("no rules",)
    rule = rules.rule_for(name)
    return ("unmatched", rules.unmatched) if rule is None else (rule.roles, rule.override)


async def narrow_rules(
    es: AsyncElasticsearch,
    source: Source,
    before: IndexOptions,
    after: IndexOptions,
    fences: Sequence[Fence] = (),
) -> Settled:
    """A rules edit in force without listing the source: every document of this source the
    index holds whose rule gives it something else now (other roles, override or not, or
    unmatched) is held at once. Only the documents below the globs the edit added or removed
    are looked at, when that is exact (``changed_below``): a folder's rule edited in a
    100,000-document source reads its folder, not the source. The held documents' keys are in
    ``keys``: the watcher reads and writes them with their new roles right away (so those who
    keep access wait for their folder, not for a re-listing); the re-listing that follows
    reconciles the rest (and what the edit newly excludes or includes)."""
    if not after.source_name:
        after = replace(after, source_name=source.description)
    done = Settled()
    below = changed_below(before.acl_rules, after.acl_rules)
    if below == []:  # (nothing any object's rule depends on changed)
        done.narrowed_at = time.time()
        return done
    names = [{"prefix": {"document_name": prefix}} for prefix in below or ()]
    stored = await stored_ids(es, after, source, names)
    done.looked = len(stored)
    hold = [
        doc_id
        for doc_id, name in stored.items()
        if mine(after, doc_id) and _fate(before.acl_rules, name) != _fate(after.acl_rules, name)
    ]
    if hold and not after.dry_run:
        async with fencing(fences, {doc_id: stored[doc_id] for doc_id in hold}):
            await guarded(after)
            await hold_documents(es, after.alias, hold, after.stamp)
            await refresh(es, after.alias)
    done.held = len(hold)
    if len(hold) <= READ_AGAIN:  # (more: one listing is cheaper than a look at each)
        done.keys = sorted({stored[doc_id] for doc_id in hold if stored[doc_id]})
    done.narrowed_at = time.time()
    return done
