"""The fields a caller's filter may name: what the chunks it can see have (design.md §4).

A filter is compiled against the metadata fields that some chunk *visible* to the caller in
the asked knowledge bases has, so a field that only chunks the caller cannot see have answers
exactly as a field that exists nowhere ("no oracle") — the same unknown-field 400 with the
same list in the native language, the same "a field every document lacks" in Dify's
conditions, never a type error that would tell its kind.

What it costs (issue #38): nothing per request once a tenant is warm. Per tenant, one
refresh records for every (knowledge base, role) which fields its chunks have, the public
chunks under role ``None`` (``TenantReads.field_owners``: one composite aggregation, paged);
a chunk a share's DACL also guards (``access_also``, ``access_denied``) under a ``Guard`` that
admits exactly the role sets the search shows it to (or fewer), never under its bare role.
A request's visible fields are then computed in memory: the public chunks' fields, plus
those of each of the caller's roles that has chunks, over the asked knowledge bases. So a
role set never seen before — every user has their own — costs set unions, not a search.

A knowledge base the table has not counted yet (indexed since the last refresh, or a name
that holds nothing) is counted on its own the first time it is asked for — one small request,
once per table — so a knowledge base just indexed is filterable at once.

A tenant's owners are refreshed in the background when older than ``MAX_AGE_S`` (requests
meanwhile use the older ones), and at once when a filter names a field they do not list
(a field just indexed) or when the mapping gained fields — but never more often than
``REFRESH_AT_MOST_EVERY_S``, nor than keeps refreshing under ``REFRESH_DUTY`` of the time
(a refresh that took 2 s waits 40 s before the next forced one), so no caller can make the
service scan an index in a loop. Until a refresh sees a new field, a filter naming it is
refused as unknown (native) or matches nothing (Dify), as before it existed; a field whose
last chunk went away, or whose chunks changed roles, is listed until the next refresh, to
the roles that saw it then (its chunks were theirs to see).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo

from retrieval_svc.errors import UnknownField
from retrieval_svc.filters import FieldCatalog, compile_filter
from retrieval_svc.filters.compiler import Query
from retrieval_svc.filters.dify import DifyFilter
from retrieval_svc.filters.dify_compiler import compile_dify
from retrieval_svc.filters.tree import And, Condition, Not, Or
from retrieval_svc.search.engine import SearchEngine
from retrieval_svc.search.tenant_reads import Guard, Owner
from retrieval_svc.words import say

log = logging.getLogger(__name__)

REFRESH_AT_MOST_EVERY_S = 1.0
REFRESH_DUTY = 0.05  # a forced refresh waits at least 1/REFRESH_DUTY times the last one's length
MAX_AGE_S = 60.0
REFRESH_BOUND_S = 60.0  # one page of a refresh, outside any request's deadline
MAX_NARROWED = 4096  # narrowed catalogs kept per tenant (one per distinct visible field set)
MAX_COUNTED = 100_000  # knowledge-base names remembered as counted, empty ones included


@dataclass(frozen=True, slots=True)
class Owners:
    """Which metadata fields the chunks of each (knowledge base, role) have, counted against
    one mapping; role ``None``: the public chunks."""

    mapping: FieldCatalog
    public: dict[str, frozenset[str]]  # knowledge base → fields of its public chunks
    by_role: dict[str, dict[str, frozenset[str]]]  # knowledge base → role → fields
    # knowledge base → guard → fields of its chunks with access_also or access_denied
    guarded: dict[str, dict[Guard, frozenset[str]]] = field(default_factory=dict)
    # The mapping narrowed to each visible field set met so far (many role sets share one).
    narrowed: OrderedDict[frozenset[str], FieldCatalog] = field(default_factory=OrderedDict)
    # Knowledge bases counted since (a new one is counted on its own when first asked for).
    counted: set[str] = field(default_factory=set)

    def merge(self, pairs: dict[tuple[str, Owner], frozenset[str]], kbs: Collection[str]) -> None:
        """Add the counts of knowledge bases counted on their own (they were not yet)."""
        if len(self.counted) > MAX_COUNTED:  # (names asked for that hold nothing, bounded)
            self.counted.intersection_update(
                self.public.keys() | self.by_role.keys() | self.guarded.keys()
            )
        for (kb, owner), paths in pairs.items():
            self._add(kb, owner, paths)
        self.counted.update(kbs)

    def _add(self, kb: str, owner: Owner, paths: frozenset[str]) -> None:
        if owner is None:
            self.public[kb] = paths
        elif isinstance(owner, Guard):
            self.guarded.setdefault(kb, {})[owner] = paths
        else:
            self.by_role.setdefault(kb, {})[owner] = paths

    def narrowed_to(self, visible: frozenset[str]) -> FieldCatalog:
        """``mapping`` with only the ``visible`` metadata fields (cached)."""
        found = self.narrowed.get(visible)
        if found is None:
            found = self.narrowed[visible] = self.mapping.restricted_to(visible)
            while len(self.narrowed) > MAX_NARROWED:
                self.narrowed.popitem(last=False)
        else:
            self.narrowed.move_to_end(visible)
        return found

    @classmethod
    def of(cls, mapping: FieldCatalog, pairs: dict[tuple[str, Owner], frozenset[str]]) -> Owners:
        """From ``field_owners``' answer; equal field sets are kept once (10,000 roles with
        the same fields hold one set)."""
        interned: dict[frozenset[str], frozenset[str]] = {}
        owners = cls(mapping, {}, {}, counted={kb for kb, _ in pairs})
        for (kb, owner), paths in pairs.items():
            owners._add(kb, owner, interned.setdefault(paths, paths))
        return owners

    def visible(self, knowledge_ids: Collection[str], roles: Collection[str]) -> frozenset[str]:
        """The fields some chunk of ``knowledge_ids`` visible to holders of ``roles`` has."""
        found: set[str] = set()
        for kb in knowledge_ids:
            found |= self.public.get(kb, frozenset())
            for guard, paths in self.guarded.get(kb, {}).items():
                if guard.admits(roles):
                    found |= paths
            held = self.by_role.get(kb)
            if not held:
                continue
            if len(roles) <= len(held):
                for role in roles:
                    found |= held.get(role, frozenset())
            else:
                for role, paths in held.items():
                    if role in roles:
                        found |= paths
        return frozenset(found)


@dataclass(slots=True)
class _Tenant:
    """One tenant's mapping and owners, and the refresh of the owners in flight."""

    mapping: FieldCatalog | None = None
    mapping_at: float = float("-inf")
    owners: Owners | None = None
    owners_at: float = float("-inf")  # when the owners in use were counted
    tried_at: float = float("-inf")  # when the last refresh started (succeeded or not)
    last_took_s: float = 0.0
    refreshing: asyncio.Task[Owners] | None = None


class CatalogCache:
    """Field catalogs per tenant, narrowed to what a role set can see."""

    def __init__(self, engine: SearchEngine, tz: tzinfo = UTC) -> None:
        self._engine = engine
        self._tz = tz
        self._tenants: dict[str, _Tenant] = {}
        self.refreshes = 0  # (counted for tests and the benchmark)

    async def catalog(
        self,
        tenant: str,
        knowledge_ids: Sequence[str],
        roles: Collection[str],
        *,
        force: bool = False,
    ) -> FieldCatalog:
        """The fields a principal holding ``roles`` may filter on in ``knowledge_ids``;
        ``force``: a filter named a field not among them, look again if allowed."""
        t = self._tenants.setdefault(tenant, _Tenant())
        mapping = await self._mapping(tenant, t, force=force)
        owners = await self._owners(tenant, t, mapping, force=force)
        new = [kb for kb in knowledge_ids if kb not in owners.counted]
        if new:  # indexed since the last refresh: count it now, on its own (a small request)
            pairs = await self._engine.field_owners(
                tenant, owners.mapping.metadata_paths(), knowledge_ids=new
            )
            owners.merge(pairs, new)
        return owners.narrowed_to(owners.visible(knowledge_ids, roles))

    async def close(self) -> None:
        """Cancel the refreshes in flight (the app is stopping)."""
        tasks = [t.refreshing for t in self._tenants.values() if t.refreshing is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _mapping(self, tenant: str, t: _Tenant, *, force: bool) -> FieldCatalog:
        age = time.monotonic() - t.mapping_at
        if t.mapping is None or age >= MAX_AGE_S or (force and _may(t.mapping_at, 0)):
            mapping = FieldCatalog.from_mappings(await self._engine.get_mappings(tenant))
            if mapping != t.mapping:  # (unchanged: keep the object the owners were counted on)
                t.mapping = mapping
            t.mapping_at = time.monotonic()
        assert t.mapping is not None
        return t.mapping

    async def _owners(
        self, tenant: str, t: _Tenant, mapping: FieldCatalog, *, force: bool
    ) -> Owners:
        owners = t.owners
        # The refresh is the tenant's, not a request's: a request whose deadline ends first is
        # answered 504 and the refresh goes on for the next one.
        if owners is None:
            return await asyncio.shield(self._refresh(tenant, t, mapping))
        allowed = _may(t.tried_at, t.last_took_s)
        wanted = allowed and (force or owners.mapping is not mapping)
        if wanted:
            return await asyncio.shield(self._refresh(tenant, t, mapping))
        if allowed and time.monotonic() - t.owners_at >= MAX_AGE_S:
            self._refresh(tenant, t, mapping)  # only old: it runs while this request goes on
        return owners

    def _refresh(self, tenant: str, t: _Tenant, mapping: FieldCatalog) -> asyncio.Task[Owners]:
        """The tenant's refresh in flight, started if none is (one at a time per tenant)."""
        if t.refreshing is not None and not t.refreshing.done():
            return t.refreshing

        async def run() -> Owners:
            started = t.tried_at = time.monotonic()
            try:
                pairs = await self._engine.field_owners(
                    tenant, mapping.metadata_paths(), bound_s=REFRESH_BOUND_S
                )
            finally:
                t.last_took_s = time.monotonic() - started
            owners = Owners.of(mapping, pairs)
            t.owners, t.owners_at = owners, time.monotonic()
            self.refreshes += 1
            return owners

        # Outside the request's context: its deadline must not cut the tenant's refresh.
        task = asyncio.create_task(run(), context=contextvars.Context())
        task.add_done_callback(_reported)
        t.refreshing = task
        return task

    async def compile(
        self,
        node: And | Or | Not | Condition | DifyFilter,
        path: str,
        *,
        tenant: str,
        knowledge_ids: Sequence[str],
        roles: Collection[str],
    ) -> Query:
        """Compile a filter against the fields visible to ``roles``; on a field not among
        them, look again first (if allowed). A native filter naming a field still unknown is
        refused, listing only the visible fields; in a Dify filter it is one every document
        lacks."""
        catalog = await self.catalog(tenant, knowledge_ids, roles)
        if isinstance(node, DifyFilter):
            if any(catalog.lookup(leaf.field) is None for leaf in node.leaves):
                catalog = await self.catalog(tenant, knowledge_ids, roles, force=True)
            return compile_dify(node, catalog, self._tz)
        try:
            return compile_filter(node, catalog, path, self._tz)
        except UnknownField:
            catalog = await self.catalog(tenant, knowledge_ids, roles, force=True)
        return compile_filter(node, catalog, path, self._tz)


def _may(at: float, took_s: float) -> bool:
    """Whether a refresh last started at ``at`` and lasting ``took_s`` may run again now."""
    return time.monotonic() - at >= max(REFRESH_AT_MOST_EVERY_S, took_s / REFRESH_DUTY)


def _reported(task: asyncio.Task[Owners]) -> None:
    """A background refresh that failed is logged (a request waiting on it gets the error)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning(say("log_catalog_failed", why=exc))
