"""A run's hold on its source's lease (``indexer.lease``): taken before anything is listed,
waiting while a watcher steps aside or another run ends, renewed while the run works, checked
before each write, given up at the end. A run that cannot take it writes nothing (exit 4); one
that loses it stops before its next write (exit 4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import typer
from elasticsearch import AsyncElasticsearch

from indexer.lease import Lease, LeaseLost
from indexer.loading import IndexOptions
from indexer.sources import Source
from retrieval_svc.search.runs import runs_index
from retrieval_svc.settings import IndexSettings
from retrieval_svc.words import say

EXIT_LEASE = 4  # another writer of the source kept its lease: nothing (more) written


async def _renewing(lease: Lease) -> None:
    """Renew every third of the lease's time (a lost lease is found by the next write's
    check; a slow cluster is tried again)."""
    while True:
        await asyncio.sleep(lease.ttl_s / 3)
        try:
            await lease.renew()
        except LeaseLost:
            return
        except Exception:  # (Elasticsearch slow: the next write's check renews or refuses)
            continue


@contextlib.asynccontextmanager
async def holding(
    es: AsyncElasticsearch,
    settings: IndexSettings,
    options: IndexOptions,
    src: Source,
    ttl_s: float,
    wait_s: float,
) -> AsyncIterator[Lease | None]:
    """Hold the source's lease for the body (a dry run writes nothing: none): its check each
    write awaits, its version each write carries."""
    if options.dry_run:
        yield None
        return
    source = options.source_name or src.description
    lease = Lease(
        es, runs_index(settings.index_alias, options.tenant), options.knowledge_id, source,
        options.shard, role="index", ttl_s=ttl_s,
    )  # fmt: skip
    if not await lease.acquire(wait_s=wait_s):
        b = lease.blocker or {}
        typer.echo(
            say("lease_not_taken", holder=b.get("name"), role=b.get("role"), host=b.get("host"),
                source=source, seconds=f"{wait_s:g}"),
            err=True,
        )  # fmt: skip
        raise typer.Exit(EXIT_LEASE)
    renewing = asyncio.create_task(_renewing(lease))
    try:
        yield lease
    except LeaseLost as lost:
        typer.echo(say("lease_lost_run", why=str(lost)), err=True)
        raise typer.Exit(EXIT_LEASE) from None
    finally:
        renewing.cancel()
        with contextlib.suppress(Exception):
            await lease.release()
