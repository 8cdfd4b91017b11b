"""The field catalog of the live index, cached and refreshed when a filter names a new field."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, tzinfo

from retrieval_svc.errors import UnknownField
from retrieval_svc.filters import FieldCatalog, compile_filter
from retrieval_svc.filters.compiler import Query
from retrieval_svc.filters.dify import DifyFilter
from retrieval_svc.filters.dify_compiler import compile_dify
from retrieval_svc.filters.fields import CHUNK_FIELDS
from retrieval_svc.filters.tree import And, Condition, Not, Or
from retrieval_svc.search.engine import SearchEngine

REFRESH_AT_MOST_EVERY_S = 1.0
MAX_AGE_S = 60.0


class CatalogCache:
    """The metadata fields in the alias's mapping; at most one refresh per second."""

    def __init__(self, engine: SearchEngine, tz: tzinfo = UTC) -> None:
        self._engine = engine
        self._tz = tz
        self._catalog = FieldCatalog()
        self._loaded_at = float("-inf")
        self._lock = asyncio.Lock()

    async def _refresh(self, *, force: bool) -> FieldCatalog:
        async with self._lock:
            age = time.monotonic() - self._loaded_at
            if age < REFRESH_AT_MOST_EVERY_S or (not force and age < MAX_AGE_S):
                return self._catalog
            self._catalog = FieldCatalog.from_mappings(await self._engine.get_mappings())
            self._loaded_at = time.monotonic()
            return self._catalog

    async def compile(
        self,
        node: And | Or | Not | Condition | DifyFilter,
        path: str,
        *,
        tenant: str,
        knowledge_ids: Sequence[str],
    ) -> Query:
        """Compile a filter; on an unknown field, look at the mapping again first.

        A native filter naming a field that is still unknown is refused, and the refusal lists
        only the fields that occur in ``tenant``'s ``knowledge_ids`` — never another tenant's or
        knowledge base's. In a Dify filter such a field is one every document lacks.
        """
        catalog = await self._refresh(force=False)
        if isinstance(node, DifyFilter):
            if any(catalog.lookup(leaf.field) is None for leaf in node.leaves):
                catalog = await self._refresh(force=True)
            return compile_dify(node, catalog, self._tz)
        try:
            return compile_filter(node, catalog, path, self._tz)
        except UnknownField:
            catalog = await self._refresh(force=True)
        try:
            return compile_filter(node, catalog, path, self._tz)
        except UnknownField as exc:
            present = await self._engine.fields_present(
                tenant, knowledge_ids, catalog.metadata_paths()
            )
            names = [*CHUNK_FIELDS, *(p.removeprefix("metadata.") for p in present)]
            raise UnknownField(exc.field, names, path=exc.path or path) from None
