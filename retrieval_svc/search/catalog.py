"""The fields a caller's filter may name: cached per tenant and per what the caller can see.

Two layers. A tenant's *mapping* catalog: the metadata fields of its own index and their
kinds (no other tenant's, since each has its own index). Of those, the fields that some chunk
*visible* to a role set in the asked knowledge bases has: a filter is compiled against these
alone, so a field that only chunks the caller cannot see have answers exactly as a field that
exists nowhere (design.md §4, "no oracle") — the same unknown-field 400 with the same list in
the native language, the same "a field every document lacks" in Dify's conditions, never a
type error that would tell its kind.

Both are cached: the mapping per tenant, the visible fields per (tenant, knowledge bases,
roles), at most ``MAX_AGE_S`` old; a filter naming a field not in them looks again, at most
once a second per entry. A cached request costs a dictionary lookup; a miss, one aggregation.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Generic, TypeVar

from retrieval_svc.errors import UnknownField
from retrieval_svc.filters import FieldCatalog, compile_filter
from retrieval_svc.filters.compiler import Query
from retrieval_svc.filters.dify import DifyFilter
from retrieval_svc.filters.dify_compiler import compile_dify
from retrieval_svc.filters.tree import And, Condition, Not, Or
from retrieval_svc.search.engine import SearchEngine

REFRESH_AT_MOST_EVERY_S = 1.0
MAX_AGE_S = 60.0
MAX_VISIBLE_ENTRIES = 4096  # (tenant, knowledge bases, roles) combinations kept

T = TypeVar("T")
VisibleKey = tuple[str, tuple[str, ...], frozenset[str]]
Visible = tuple[FieldCatalog, FieldCatalog]  # the mapping checked, and narrowed to those found


@dataclass(slots=True)
class _Slot(Generic[T]):
    """One cached value, its age, and the lock its refresh runs under."""

    value: T | None = None
    loaded_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def get(
        self,
        load: Callable[[], Awaitable[T]],
        *,
        force: bool,
        outdated: Callable[[T], bool] = lambda _: False,
    ) -> T:
        """The value, loaded again when older than ``MAX_AGE_S``, when ``force``d (at most
        once a second), or when ``outdated`` says so (a new fact, never throttled)."""
        async with self.lock:
            age = time.monotonic() - self.loaded_at
            fresh = age < REFRESH_AT_MOST_EVERY_S or (not force and age < MAX_AGE_S)
            if self.value is None or not fresh or outdated(self.value):
                self.value = await load()
                self.loaded_at = time.monotonic()
            return self.value


class CatalogCache:
    """Field catalogs per tenant, narrowed to what a role set can see."""

    def __init__(self, engine: SearchEngine, tz: tzinfo = UTC) -> None:
        self._engine = engine
        self._tz = tz
        self._mappings: dict[str, _Slot[FieldCatalog]] = {}
        self._visible: OrderedDict[VisibleKey, _Slot[Visible]] = OrderedDict()

    async def catalog(
        self,
        tenant: str,
        knowledge_ids: Sequence[str],
        roles: Collection[str],
        *,
        force: bool = False,
    ) -> FieldCatalog:
        """The fields a principal holding ``roles`` may filter on in ``knowledge_ids``."""
        mapping_slot = self._mappings.setdefault(tenant, _Slot())

        async def load_mapping() -> FieldCatalog:
            return FieldCatalog.from_mappings(await self._engine.get_mappings(tenant))

        mapping = await mapping_slot.get(load_mapping, force=force)
        key = (tenant, tuple(sorted(set(knowledge_ids))), frozenset(roles))
        slot = self._visible.pop(key, None) or _Slot()
        self._visible[key] = slot  # most recently used last
        while len(self._visible) > MAX_VISIBLE_ENTRIES:
            self._visible.popitem(last=False)

        async def load_visible() -> Visible:
            paths = sorted(mapping.metadata_paths())
            found = await self._engine.fields_present(tenant, key[1], roles, paths)
            return mapping, mapping.restricted_to(found)

        def outdated(value: Visible) -> bool:
            """Narrowed from a mapping with other fields: the new ones are unchecked."""
            checked = value[0]
            return checked is not mapping and checked.metadata_paths() != mapping.metadata_paths()

        _, visible = await slot.get(load_visible, force=force, outdated=outdated)
        return visible

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
        them, look again first. A native filter naming a field still unknown is refused,
        listing only the visible fields; in a Dify filter it is one every document lacks."""
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
