"""The chunk index: template, first index and alias, applied idempotently."""

from __future__ import annotations

import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch, BadRequestError

log = logging.getLogger(__name__)


def mappings_dir() -> Path:
    """Where the mapping JSON files are: packaged in a wheel, or the checkout's mappings/."""
    packaged = Path(__file__).resolve().parents[1] / "_mappings"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "mappings"


@cache
def load_mapping_file(name: str) -> dict[str, Any]:
    """One JSON file from the mappings folder."""
    data: dict[str, Any] = json.loads((mappings_dir() / name).read_text(encoding="utf-8"))
    return data


def template_name(alias: str) -> str:
    """The index template's name for an alias."""
    return f"{alias}-template"


def index_name(alias: str, generation: int) -> str:
    """A concrete index behind ``alias``."""
    return f"{alias}-{generation:06d}"


async def analysis_flavour(es: AsyncElasticsearch) -> str:
    """``cjk`` when the cluster has the cjk analyzer, else ``core`` (see mappings/README.md)."""
    try:
        await es.indices.analyze(analyzer="cjk", text="巡检")
    except BadRequestError:
        return "core"
    return "cjk"


def index_template(alias: str, flavour: str) -> dict[str, Any]:
    """The body of the index template for ``alias``."""
    mappings = dict(load_mapping_file("chunk-mappings.json"))
    mappings["_meta"] = {**mappings.get("_meta", {}), "analysis": flavour}
    return {
        "index_patterns": [f"{alias}-*"],
        # `a-*` and `b-*` overlap only when one alias prefixes the other (`kb`, `kb-test`);
        # Elasticsearch refuses overlapping templates of equal priority, so the longer, more
        # specific alias gets the higher one.
        "priority": 100 + len(alias),
        "template": {
            "settings": {
                "index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"},
                "analysis": load_mapping_file(f"analysis-{flavour}.json"),
            },
            "mappings": mappings,
        },
        "_meta": {"managed_by": "retrieval-svc", "analysis": flavour},
    }


async def ensure_index(es: AsyncElasticsearch, alias: str) -> str:
    """Apply the template and, if the alias is missing, create its first index. Idempotent.

    Returns the analysis flavour in use.
    """
    flavour = await analysis_flavour(es)
    body = index_template(alias, flavour)
    await es.indices.put_index_template(name=template_name(alias), **body)
    if not await es.indices.exists_alias(name=alias):
        first = index_name(alias, 1)
        try:
            await es.indices.create(index=first, aliases={alias: {"is_write_index": True}})
        except BadRequestError as exc:
            # Another process created it between our check and create: that is fine.
            if exc.error != "resource_already_exists_exception":
                raise
        log.info("created index %s behind alias %s (analysis: %s)", first, alias, flavour)
    return flavour
