"""The chunk index template and alias, applied to the real Elasticsearch."""

from __future__ import annotations

import pytest
from elasticsearch import AsyncElasticsearch, BadRequestError, Elasticsearch

from retrieval_svc.embedding.base import EmbeddingModel
from retrieval_svc.search.index import (
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    ensure_index,
    index_name,
    template_name,
)
from retrieval_svc.tenancy import tenant_alias

pytestmark = pytest.mark.anyio
T = "index-test"  # a tenant of these tests alone (its own index under the session's alias)


async def test_ensure_index_is_idempotent(es: AsyncElasticsearch, alias: str) -> None:
    first = await ensure_index(es, alias, tenant=T)
    second = await ensure_index(es, alias, tenant=T)
    assert first == second
    own = tenant_alias(alias, T)
    indices = await es.indices.get_alias(name=own)
    assert list(indices) == [index_name(own, 1)] == [f"{alias}.index_2dtest-000001"]
    assert indices[index_name(own, 1)]["aliases"][own]["is_write_index"] is True


async def test_mapping_is_the_contract(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias, tenant=T)
    mapping = await es.indices.get_mapping(index=tenant_alias(alias, T))
    props = next(iter(mapping.values()))["mappings"]["properties"]
    assert props["access_roles"]["type"] == "keyword"
    assert props["knowledge_id"]["type"] == "keyword"
    assert props["segment_position"]["type"] == "integer"
    assert props["content"] == {"type": "text", "analyzer": "rsvc_text"}
    assert props["document_title"]["fields"]["keyword"]["type"] == "keyword"
    assert props["indexed_at"]["type"] == "date"


@pytest.mark.parametrize("index_type", ["int8_hnsw", "bbq_hnsw", "int8_flat"])
async def test_the_vector_graph_is_built_to_stay_connected(
    es: AsyncElasticsearch, alias: str, index_type: str
) -> None:
    """A graph type gets the links that kept every chunk reachable after a merge at 1M
    (issue #25), and Elasticsearch accepts them; a flat type has no graph to shape."""
    own = f"{alias}-{index_type.replace('_', '')}"
    model = EmbeddingModel(model="test-model", dims=64)
    try:
        await ensure_index(es, own, model, tenant=T, vector_index_type=index_type)
        mapping = await es.indices.get_mapping(index=tenant_alias(own, T))
        field = next(iter(mapping.values()))["mappings"]["properties"]["embedding"]
        options = field["index_options"]
        assert options["type"] == index_type
        if index_type.endswith("hnsw"):
            assert (options["m"], options["ef_construction"]) == (HNSW_M, HNSW_EF_CONSTRUCTION)
        else:
            assert "m" not in options and "ef_construction" not in options
    finally:
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(own))


async def test_metadata_strings_become_keywords(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias, tenant=T)
    await es.index(
        index=tenant_alias(alias, T),
        id="mapping-probe",
        document={
            "knowledge_id": "mapping-probe",
            "content": "x",
            "metadata": {"category": "巡检", "year": 2026, "effective": "2026-03-01"},
        },
        refresh=True,
    )
    mapping = await es.indices.get_mapping(index=tenant_alias(alias, T))
    meta = next(iter(mapping.values()))["mappings"]["properties"]["metadata"]["properties"]
    assert meta["category"]["type"] == "keyword"
    # Numbers are doubles (Dify compares them with as_float(); a long field would truncate
    # 2025.5 arriving after 2024), each with its text as written.
    assert meta["year"]["type"] == "double" and meta["year"]["fields"]["text"]["type"] == "keyword"
    assert meta["effective"]["type"] == "date"
    await es.delete(index=tenant_alias(alias, T), id="mapping-probe", refresh=True)


async def test_unknown_top_level_fields_are_refused(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias, tenant=T)
    with pytest.raises(BadRequestError, match="strict"):
        await es.index(
            index=tenant_alias(alias, T), document={"knowledge_id": "x", "acess_roles": ["typo"]}
        )


async def test_analyzer_makes_chinese_bigrams(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias, tenant=T)
    out = await es.indices.analyze(
        index=tenant_alias(alias, T), analyzer="rsvc_text", text="巡更人员"
    )
    tokens = {t["token"] for t in out["tokens"]}
    assert {"巡更", "更人", "人员"} <= tokens


def test_template_records_the_analysis_choice(es_sync: Elasticsearch, alias: str) -> None:
    body = es_sync.indices.get_index_template(name=template_name(alias))
    meta = body["index_templates"][0]["index_template"]["_meta"]
    try:
        es_sync.indices.analyze(analyzer="cjk", text="巡检")
        expected = "cjk"
    except BadRequestError:
        expected = "core"
    assert meta["analysis"] == expected


async def test_an_alias_may_prefix_another(es: AsyncElasticsearch, alias: str) -> None:
    longer = f"{alias}-archive"
    try:
        await ensure_index(es, alias, tenant=T)
        await ensure_index(es, longer, tenant=T)
        own = tenant_alias(longer, T)
        await es.index(index=own, document={"knowledge_id": "x", "content": "档案"}, refresh=True)
        assert (await es.count(index=own))["count"] == 1
        assert sorted(await es.indices.get_alias(name=own)) == [f"{own}-000001"]
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{longer}.*")
        await es.options(ignore_status=404).indices.delete_index_template(
            name=template_name(longer)
        )


async def test_every_tenant_has_its_own_index(es: AsyncElasticsearch, alias: str) -> None:
    tenants = ["t-one", "T-one", "租户", "t_one"]  # alike to a person, never to the index
    for tenant in tenants:
        await ensure_index(es, alias, tenant=tenant)
    owners = {tenant: tenant_alias(alias, tenant) for tenant in tenants}
    assert len(set(owners.values())) == len(tenants)
    for tenant, own in owners.items():
        indices = await es.indices.get_alias(name=own)
        assert list(indices) == [index_name(own, 1)], (tenant, indices)
