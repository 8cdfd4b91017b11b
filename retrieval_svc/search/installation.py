"""Whose indices these are: an installation's id, stamped in every index it writes.

Two installations pointed at one cluster with the same alias (a second checkout, a demo, another
team's service on the Elasticsearch at 9200) would write into each other's indices: prune each
other's documents, mix their tenants. So each index under an alias carries, in its mapping's
``_meta.installation``, the id of the installation that first wrote it (the template carries it
too, so an index is stamped from its creation). The service and the indexer compare it with their
own (``RSVC_INSTALLATION_ID``, else the folder they run from: a checkout, or where the package is
installed) and refuse another's; ``RSVC_INSTALLATION_ADOPT=true`` takes such indices over on
purpose. Indices written before the stamp existed carry none: their first writer stamps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticsearch import AsyncElasticsearch

STAMP = "installation"


class ForeignIndices(Exception):
    """The indices under an alias belong to another installation."""

    def __init__(self, alias: str, index: str, owner: str, ours: str) -> None:
        super().__init__(f"{index} under {alias} belongs to {owner}, not {ours}")
        self.alias = alias
        self.index = index
        self.owner = owner
        self.ours = ours


def _meta(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = (body.get("mappings") or {}).get("_meta")
    return dict(meta) if isinstance(meta, Mapping) else {}


async def stamps(es: AsyncElasticsearch, alias: str) -> dict[str, dict[str, Any]]:
    """Each index under ``alias`` (every tenant's) with its mapping's ``_meta``."""
    mappings = await es.indices.get_mapping(
        index=f"{alias}.*", allow_no_indices=True, ignore_unavailable=True
    )
    return {name: _meta(body) for name, body in mappings.items() if isinstance(body, Mapping)}


async def template_owner(es: AsyncElasticsearch, alias: str) -> str | None:
    """The installation the template of ``alias`` was put by (None: none, or unstamped)."""
    found = await es.options(ignore_status=404).indices.get_index_template(name=f"{alias}-template")
    templates = found.get("index_templates") or []
    for template in templates:
        owner = (template.get("index_template", {}).get("_meta") or {}).get(STAMP)
        if owner:
            return str(owner)
    return None


async def claim(
    es: AsyncElasticsearch, alias: str, ours: str, *, adopt: bool = False, stamp: bool = True
) -> None:
    """Raise ``ForeignIndices`` if an index under ``alias`` (or its template) is another
    installation's, unless ``adopt``; with ``stamp``, mark each index not yet ours as ours.

    Without ``stamp`` (a process that only reads, or writes no index of its own) nothing is
    changed."""
    held = await stamps(es, alias)
    owners = [(index, str(meta[STAMP])) for index, meta in sorted(held.items()) if meta.get(STAMP)]
    template = await template_owner(es, alias)
    if template:
        owners.append((f"{alias}-template", template))
    if not adopt:
        for index, owner in owners:
            if owner != ours:
                raise ForeignIndices(alias, index, owner, ours)
    if not stamp:
        return
    for index, meta in sorted(held.items()):
        if meta.get(STAMP) != ours:
            # `_meta` is replaced whole by a mapping update: keep what else it records.
            await es.indices.put_mapping(index=index, meta={**meta, STAMP: ours})
