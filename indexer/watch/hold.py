"""A hold: every chunk of some documents made to answer no one (``HELD_ROLE``) at once, while
they are read again — fenced like every other write of a lease's holder (``indexer.lease``).

A hold is a whole ``index`` of each chunk as stored, ``access_roles`` replaced, carrying the
holder's version (``external_gte``). A partial ``update`` cannot carry one (Elasticsearch adds
one to the chunk's own), so an earlier holder's late write over a chunk the new holder had
only held would land, answering with older, wider roles. The orderings:

* The version is taken *before* the chunks are read: anything this holder writes or deletes
  afterwards carries a higher one, so a chunk changed since the read is never overwritten
  with the older copy read here (refused, and the newer write stays).
* An earlier holder's write that lands after the hold is refused (a lower version); one that
  landed between the read and the hold is overwritten, held.
* A chunk an earlier holder deleted between the read and the hold comes back ``created``:
  it is deleted again at once, with a version above the hold's. It answered no one in
  between (it was held), and it never stays.
* Without a lease (a library caller) a chunk is written only if it is still the one read
  (``if_seq_no``/``if_primary_term``): never over a newer write, never brought back.

A chunk this holding already held (held, at a version of its number) is left as it is, so a
document held again by the next rules edit (or the re-listing after it) costs reading its
roles: the roles are read first, whole chunks, vectors and all, only of those to write.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk, async_scan, async_streaming_bulk

from indexer.store import HELD_ROLE, versioned
from indexer.writing import BULK
from retrieval_svc.words import say

log = logging.getLogger("indexer.watch")

TERMS = 10_000  # document ids a read asks for at once (under Elasticsearch's 65,536)


async def hold_actions(
    es: AsyncElasticsearch, alias: str, doc_ids: list[str], version: int | None
) -> AsyncIterator[dict[str, Any]]:
    """The writes that hold the chunks of ``doc_ids`` as they are stored now, each carrying
    ``version`` (None: the chunk's sequence number, written only if unchanged); none for a
    chunk this holding already held. Roles are read first, whole chunks (their vectors) only
    of those to write."""
    for i in range(0, len(doc_ids), TERMS):
        query = {"terms": {"document_id": doc_ids[i : i + TERMS]}}
        body = {"query": query, "_source": ["access_roles"], "version": True}
        page: list[dict[str, str]] = []
        async for hit in async_scan(es, index=alias, query=body, size=1000):
            if hit.get("_source", {}).get("access_roles") == [HELD_ROLE] and (
                version is None or hit["_version"] >> 32 >= version >> 32
            ):
                continue  # (held already, at this holding's number or later: fenced)
            page.append({"_index": hit["_index"], "_id": hit["_id"]})
            if len(page) == 500:
                for action in await _read_back(es, page, version):
                    yield action
                page = []
        for action in await _read_back(es, page, version):
            yield action


async def _read_back(
    es: AsyncElasticsearch, page: list[dict[str, str]], version: int | None
) -> list[dict[str, Any]]:
    """The holds of the chunks ``page``, each read whole as it is now (one gone: none)."""
    if not page:
        return []
    found = await es.mget(docs=page, realtime=True)
    actions = []
    for doc in found["docs"]:
        if not doc.get("found"):
            continue
        chunk = doc["_source"]
        chunk["access_roles"] = [HELD_ROLE]
        fence: dict[str, Any] = (
            {"version": version, "version_type": "external_gte"}
            if version is not None
            else {"if_seq_no": doc["_seq_no"], "if_primary_term": doc["_primary_term"]}
        )
        actions.append({"_index": doc["_index"], "_id": doc["_id"], "_source": chunk, **fence})
    return actions


async def write_holds(
    es: AsyncElasticsearch,
    actions: AsyncIterable[dict[str, Any]],
    stamp: Callable[[], int] | None = None,
) -> int:
    """Write ``hold_actions``; how many chunks are held by them. A chunk that came back
    (deleted since it was read) is deleted again (``stamp``: above the hold's version); one
    written since it was read keeps that write (a version conflict, not a failure)."""
    held = 0
    back: list[tuple[str, str]] = []
    async for ok, item in async_streaming_bulk(
        es,
        actions,
        **BULK,
    ):
        info = next(iter(item.values()))
        if ok:
            held += 1
            if info.get("result") == "created":
                back.append((str(info["_index"]), str(info["_id"])))
        elif info.get("status") != 409:
            log.error(say("hold_failed", chunk=info.get("_id"), why=info.get("error")))
    if back:
        fence = versioned(stamp)
        gone = [{"_op_type": "delete", "_index": i, "_id": d, **fence} for i, d in back]
        await async_bulk(es, gone, raise_on_error=False)
        held -= len(back)
    return held


async def hold_documents(
    es: AsyncElasticsearch,
    alias: str,
    doc_ids: list[str],
    stamp: Callable[[], int] | None = None,
) -> int:
    """Make every chunk of ``doc_ids`` answer no one (``HELD_ROLE``), fenced by the writer's
    version (``stamp``); how many chunks this wrote held."""
    if not doc_ids:
        return 0
    version = stamp() if stamp is not None else None
    return await write_holds(es, hold_actions(es, alias, doc_ids, version), stamp)
