"""The chunk indices: one template, and per tenant an alias and its first index, applied
idempotently.

Every tenant has its own index behind its own alias, ``<alias>.<tenant slug>``
(``settings.tenant_alias``), so term statistics, mappings and field catalogs never cross
tenants (design.md §4). One index template, for ``<alias>.*``, shapes them all. Before tenants
had their own indices, every chunk lived behind the alias ``<alias>`` itself: that layout is
recognised (``legacy_layout``) and split by ``retrieval-indexer rebuild``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from functools import cache
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch, BadRequestError

from retrieval_svc.embedding.base import EmbeddingModel, ModelMismatch
from retrieval_svc.problem_words import PROBLEMS
from retrieval_svc.search.installation import STAMP, claim
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import tenant_alias
from retrieval_svc.words import say

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
    """A concrete index behind a tenant's ``alias``."""
    return f"{alias}-{generation:06d}"


def tenant_indices(alias: str) -> str:
    """The pattern of every tenant's indices (and aliases) under ``alias``."""
    return f"{alias}.*"


async def legacy_layout(es: AsyncElasticsearch, alias: str) -> bool:
    """Whether ``alias`` itself names indices: the shared layout from before tenants had
    their own, which ``retrieval-indexer rebuild`` splits."""
    return bool(await es.indices.exists_alias(name=alias))


LEGACY_MESSAGE = (
    "the index alias {alias!r} holds every tenant's chunks in one index, the layout of earlier "
    "versions; tenants now have an index each. Run `retrieval-indexer rebuild` once: it copies "
    "each tenant's chunks into its own index and removes the shared one (docs/indexer.md, "
    '"Upgrading").'
)


async def analysis_flavour(es: AsyncElasticsearch) -> str:
    """``cjk`` when the cluster has the cjk analyzer, else ``core`` (see mappings/README.md)."""
    try:
        await es.indices.analyze(analyzer="cjk", text="巡检")
    except BadRequestError:
        return "core"
    return "cjk"


#: The HNSW graph's links per node and build-time candidates (Elasticsearch's defaults are 16
#: and 100). Merged into one segment, a 1M-chunk graph built with the defaults left about one
#: chunk in nine unreachable (searched with its own vector, not found even with 10,000
#: candidates), capping recall@10 at 0.90 whatever the query asked. At the same cluster
#: density (100k chunks from 1,000 real vectors, merged): 16/100 found 94% of chunks by their
#: own vector, recall@10 0.93; 16/400 99%, 0.97; 32/200 every chunk, 0.99, for 1.3× the
#: indexing time and 2× the merge time, the search as fast (issue #25).
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200


def vector_field(model: EmbeddingModel, index_type: str = "int8_hnsw") -> dict[str, Any]:
    """The ``embedding`` field for ``model``: cosine similarity, quantised HNSW by default."""
    options: dict[str, Any] = {"type": index_type}
    if index_type.endswith("hnsw"):
        options |= {"m": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION}
    return {
        "type": "dense_vector",
        "dims": model.dims,
        "index": True,
        "similarity": "cosine",
        "index_options": options,
    }


def index_template(
    alias: str,
    flavour: str,
    embedding: EmbeddingModel | None = None,
    vector_index_type: str = "int8_hnsw",
    *,
    shards: int = 1,
    replicas: str = "0-1",
    installation: str | None = None,
) -> dict[str, Any]:
    """The body of the index template for ``alias`` (with a vector field when ``embedding``;
    stamped with ``installation``, which each index made from it carries).

    ``replicas`` is a count ("1") or an auto-expand range ("0-1": none while the cluster has
    one node, one as soon as it has two).
    """
    layout: dict[str, Any] = {"number_of_shards": shards}
    if replicas.isdigit():
        layout["number_of_replicas"] = int(replicas)
    else:
        layout["auto_expand_replicas"] = replicas
    mappings = dict(load_mapping_file("chunk-mappings.json"))
    mappings["_meta"] = {**mappings.get("_meta", {}), "analysis": flavour}
    if embedding is not None:
        mappings["properties"] = {
            **mappings["properties"],
            "embedding": vector_field(embedding, vector_index_type),
        }
        mappings["_meta"]["embedding"] = embedding.as_meta()
    meta: dict[str, Any] = {"managed_by": "retrieval-svc", "analysis": flavour}
    if installation:
        mappings["_meta"][STAMP] = meta[STAMP] = installation
    return {
        "index_patterns": [tenant_indices(alias)],
        # `a.*` and `b.*` overlap only when one alias prefixes the other (`kb`, `kb.test`);
        # Elasticsearch refuses overlapping templates of equal priority, so the longer, more
        # specific alias gets the higher one.
        "priority": 100 + len(alias),
        "template": {
            "settings": {
                "index": layout,
                "analysis": load_mapping_file(f"analysis-{flavour}.json"),
            },
            "mappings": mappings,
        },
        "_meta": meta,
    }


async def index_models(es: AsyncElasticsearch, target: str) -> dict[str, EmbeddingModel | None]:
    """The embedding model recorded by each index of ``target`` (an alias or a pattern; None:
    built without)."""
    out: dict[str, EmbeddingModel | None] = {}
    mappings = await es.indices.get_mapping(index=target, allow_no_indices=True)
    for name, body in mappings.items():
        meta = (body.get("mappings") or {}).get("_meta", {}).get("embedding")
        out[name] = EmbeddingModel(str(meta["model"]), int(meta["dims"])) if meta else None
    return out


def mismatch_message(
    alias: str, index: str, stored: EmbeddingModel | None, wanted: EmbeddingModel
) -> str:
    """What to tell a user whose configured model is not the index's (in English, as a refusal
    is made; ``words.problem`` says it again in the reader's language)."""
    values = {"index": index, "alias": alias, "wanted": wanted.model, "wanted_dims": wanted.dims}
    if stored is None:
        return PROBLEMS["model_mismatch_no_vectors"][0].format(**values)
    return PROBLEMS["model_mismatch"][0].format(model=stored.model, dims=stored.dims, **values)


async def check_index_model(
    es: AsyncElasticsearch, alias: str, embedding: EmbeddingModel | None
) -> None:
    """Raise ``ModelMismatch`` unless every tenant's index under ``alias`` was built for
    ``embedding``.

    With no embedder (BM25 only) any index serves: its vectors are simply not used.
    """
    if embedding is None:
        return
    for index, stored in (await index_models(es, tenant_indices(alias))).items():
        if stored != embedding:
            raise ModelMismatch(mismatch_message(alias, index, stored, embedding))


async def put_template(
    es: AsyncElasticsearch,
    alias: str,
    embedding: EmbeddingModel | None = None,
    *,
    vector_index_type: str = "int8_hnsw",
    shards: int = 1,
    replicas: str = "0-1",
    installation: str | None = None,
) -> str:
    """Apply the one template of every tenant's indices under ``alias``; the analysis
    flavour it uses."""
    flavour = await analysis_flavour(es)
    body = index_template(
        alias,
        flavour,
        embedding,
        vector_index_type,
        shards=shards,
        replicas=replicas,
        installation=installation,
    )
    await es.indices.put_index_template(name=template_name(alias), **body)
    # Indices made before a field was added take it too (the mapping is strict: a chunk with
    # an unknown field would be refused). Adding a field is always compatible.
    await es.indices.put_mapping(
        index=tenant_indices(alias),
        properties=load_mapping_file("chunk-mappings.json")["properties"],  # (not the vector)
        allow_no_indices=True,
        ignore_unavailable=True,
    )
    return flavour


async def ensure_index(
    es: AsyncElasticsearch,
    alias: str,
    embedding: EmbeddingModel | None = None,
    *,
    tenant: str,
    vector_index_type: str = "int8_hnsw",
    check_model: bool = True,
    shards: int = 1,
    replicas: str = "0-1",
    installation: str | None = None,
    adopt: bool = False,
) -> str:
    """Apply the template and, if ``tenant``'s alias is missing, create its first index.
    Idempotent.

    With ``installation``, refuses (``ForeignIndices``) indices under ``alias`` that another
    installation wrote, unless ``adopt``, before writing anything, and stamps them as its own.

    ``shards`` and ``replicas`` shape indices created from now on (a tenant's first, and each
    ``rebuild``); an existing index keeps its shards.

    Refuses (``ModelMismatch``) an existing index built for another embedding model, unless
    ``check_model`` is false (``rebuild`` replaces such an index). Returns the analysis
    flavour in use.
    """
    if installation:  # (refused before anything is written)
        await claim(es, alias, installation, adopt=adopt, stamp=False)
    if check_model:
        await check_index_model(es, alias, embedding)
    flavour = await put_template(
        es,
        alias,
        embedding,
        vector_index_type=vector_index_type,
        shards=shards,
        replicas=replicas,
        installation=installation,
    )
    own = tenant_alias(alias, tenant)
    if not await es.indices.exists_alias(name=own):
        first = index_name(own, 1)
        try:
            await es.indices.create(index=first, aliases={own: {"is_write_index": True}})
        except BadRequestError as exc:
            # Another process created it between our check and create: that is fine.
            if exc.error != "resource_already_exists_exception":
                raise
        else:
            log.info(say("log_created_index", index=first, alias=own, analysis=flavour))
    if installation:
        await claim(es, alias, installation, adopt=True)  # (stamps what is not yet its own)
    await primaries_active(es, own)
    return flavour


async def primaries_active(es: AsyncElasticsearch, alias: str, timeout_s: float = 60) -> bool:
    """Wait until every primary shard behind ``alias`` is active; whether they are.

    Several indexer shards start at once on a new alias: one creates the index (and waits for
    its primaries), the others must not search it before then (a 503
    search_phase_execution_exception). Not ``wait_for_status=yellow``: Elasticsearch reports a
    new index whose primaries are still initializing as yellow. Replicas are not waited for.
    An index whose primaries are active answers at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = await es.options(ignore_status=(404, 408)).cluster.health(
            index=alias, level="indices"
        )
        indices = health.body.get("indices", {}) if isinstance(health.body, dict) else {}
        if indices and all(
            i.get("active_primary_shards") == i.get("number_of_shards") for i in indices.values()
        ):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)


async def ensure_configured_index(
    es: AsyncElasticsearch,
    settings: IndexSettings,
    embedding: EmbeddingModel | None,
    tenant: str,
) -> str:
    """``ensure_index`` for ``tenant``, with the alias, vector type and layout in ``settings``."""
    return await ensure_index(
        es,
        settings.index_alias,
        embedding,
        tenant=tenant,
        vector_index_type=settings.vector_index_type,
        shards=settings.index_shards,
        replicas=settings.index_replicas,
        installation=settings.installation,
        adopt=settings.installation_adopt,
    )
