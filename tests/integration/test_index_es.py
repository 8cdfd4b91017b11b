"""The chunk index template and alias, applied to the real Elasticsearch."""

from __future__ import annotations

import pytest
from elasticsearch import AsyncElasticsearch, BadRequestError, Elasticsearch

from retrieval_svc.search.index import ensure_index, index_name, template_name

pytestmark = pytest.mark.anyio


async def test_ensure_index_is_idempotent(es: AsyncElasticsearch, alias: str) -> None:
    first = await ensure_index(es, alias)
    second = await ensure_index(es, alias)
    assert first == second
    indices = await es.indices.get_alias(name=alias)
    assert list(indices) == [index_name(alias, 1)]
    assert indices[index_name(alias, 1)]["aliases"][alias]["is_write_index"] is True


async def test_mapping_is_the_contract(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias)
    mapping = await es.indices.get_mapping(index=alias)
    props = next(iter(mapping.values()))["mappings"]["properties"]
    assert props["access_roles"]["type"] == "keyword"
    assert props["knowledge_id"]["type"] == "keyword"
    assert props["segment_position"]["type"] == "integer"
    assert props["content"] == {"type": "text", "analyzer": "rsvc_text"}
    assert props["document_title"]["fields"]["keyword"]["type"] == "keyword"
    assert props["indexed_at"]["type"] == "date"


async def test_metadata_strings_become_keywords(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias)
    await es.index(
        index=alias,
        id="mapping-probe",
        document={
            "knowledge_id": "mapping-probe",
            "content": "x",
            "metadata": {"category": "巡检", "year": 2026, "effective": "2026-03-01"},
        },
        refresh=True,
    )
    mapping = await es.indices.get_mapping(index=alias)
    meta = next(iter(mapping.values()))["mappings"]["properties"]["metadata"]["properties"]
    assert meta["category"]["type"] == "keyword"
    # Numbers are doubles (Dify compares them with as_float(); a long field would truncate
    # 2025.5 arriving after 2024), each with its text as written.
    assert meta["year"]["type"] == "double" and meta["year"]["fields"]["text"]["type"] == "keyword"
    assert meta["effective"]["type"] == "date"
    await es.delete(index=alias, id="mapping-probe", refresh=True)


async def test_unknown_top_level_fields_are_refused(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias)
    with pytest.raises(BadRequestError, match="strict"):
        await es.index(index=alias, document={"knowledge_id": "x", "acess_roles": ["typo"]})


async def test_analyzer_makes_chinese_bigrams(es: AsyncElasticsearch, alias: str) -> None:
    await ensure_index(es, alias)
    out = await es.indices.analyze(index=alias, analyzer="rsvc_text", text="巡更人员")
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
        await ensure_index(es, alias)
        await ensure_index(es, longer)
        await es.index(
            index=longer, document={"knowledge_id": "x", "content": "档案"}, refresh=True
        )
        assert (await es.count(index=longer))["count"] == 1
        assert sorted(await es.indices.get_alias(name=longer)) == [f"{longer}-000001"]
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{longer}-*")
        await es.options(ignore_status=404).indices.delete_index_template(
            name=template_name(longer)
        )
