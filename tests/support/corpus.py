"""The test corpus: the bundled samples through the real indexer, plus ACL edge cases."""

from __future__ import annotations

import asyncio
from typing import Any

from elasticsearch import AsyncElasticsearch, Elasticsearch

from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.search.index import ensure_index, index_name
from retrieval_svc.tenancy import tenant_alias
from tests.support import ES_URL, SAMPLES

TENANT = "acme"  # the test keys' tenant (tests/support/__init__.py)
SAMPLES_KB = "building-ops"
ACL_KB = "acl-forms"

# Stored exactly as a writer other than our indexer might: absent, null, [] and restricted.
ACL_DOCS = {
    "acl-absent": {},
    "acl-null": {"access_roles": None},
    "acl-empty": {"access_roles": []},
    "acl-mgr": {"access_roles": ["物业经理"]},
    "acl-ops-mgr": {"access_roles": ["运维工程师", "物业经理"]},
}


FILTER_KB = "filters"

# Public documents whose metadata exercises every operator. All contain 通用 so one query
# matches every one of them and only the filter decides. Dates are stored as the indexer
# stores date-only values with the default RSVC_TIMEZONE (Asia/Shanghai): local midnight.
FILTER_DOCS: dict[str, dict[str, object]] = {
    "f1": {
        "document_title": "巡更操作指南",
        "segment_position": 1,
        "metadata": {
            "category": "巡检",
            "tags": ["a", "b"],
            "year": 2024,
            "effective": "2026-03-01T00:00:00+08:00",
            "draft": False,
        },
    },
    "f2": {
        "document_title": "配电房规程",
        "segment_position": 2,
        "metadata": {
            "category": "设备",
            "tags": ["b", "c"],
            "year": 2025,
            "effective": "2025-06-01T00:00:00+08:00",
            "draft": True,
        },
    },
    "f3": {
        "document_title": "消防制度 v2",
        "segment_position": 3,
        "metadata": {"category": "制度"},
    },
    "f4": {
        "document_title": "特殊字符 a OR b*",
        "segment_position": 4,
        "access_roles": [],
        "metadata": {
            "category": "巡检*?",
            "tags": ["a"],
            "year": 2026,
            "effective": "2026-11-01T00:00:00+08:00",
        },
    },
}


def own(alias: str, tenant: str = TENANT) -> str:
    """The alias of ``tenant``'s own index under the test alias ``alias``."""
    return tenant_alias(alias, tenant)


def tenant_index(es_sync: Elasticsearch, alias: str, tenant: str = TENANT) -> str:
    """``tenant``'s alias under ``alias``, its first index created if missing (the template
    is the corpus's)."""
    name = own(alias, tenant)
    if not es_sync.indices.exists_alias(name=name):
        es_sync.options(ignore_status=400).indices.create(
            index=index_name(name, 1), aliases={name: {"is_write_index": True}}
        )
    return name


def store_chunks(
    es_sync: Elasticsearch, alias: str, knowledge_id: str, docs: dict[str, dict[str, Any]]
) -> None:
    """Store ``docs`` (chunk id → fields) as one-chunk documents of ``knowledge_id`` in the
    corpus tenant's index, directly, and make them searchable."""
    index = tenant_index(es_sync, alias, TENANT)
    for doc_id, doc in docs.items():
        es_sync.index(
            index=index,
            id=doc_id,
            document={"chunk_id": doc_id, "document_id": doc_id, "tenant": TENANT,
                      "knowledge_id": knowledge_id, "document_title": doc_id, **doc},
        )  # fmt: skip
    es_sync.indices.refresh(index=index)


def load_corpus(es_sync: Elasticsearch, alias: str) -> None:
    """Index the samples with the indexer and the ACL edge cases directly."""

    async def run() -> None:
        es = AsyncElasticsearch(ES_URL, request_timeout=30)
        try:
            await ensure_index(es, alias, tenant=TENANT)
            options = IndexOptions(
                knowledge_id=SAMPLES_KB,
                alias=own(alias),
                tenant=TENANT,
                dataset_name="楼宇运营知识库",
            )
            report = await index_source(es, LocalSource(SAMPLES), options)
            assert report.ok, report.failures
        finally:
            await es.close()

    asyncio.run(run())
    raw_docs = {
        doc_id: {
            "knowledge_id": ACL_KB,
            "content": f"消防演练每半年组织一次（{doc_id}）",
            "document_title": "消防演练",
            "dataset_name": "权限测试库",
            "segment_position": 1,
            **acl,
        }
        for doc_id, acl in ACL_DOCS.items()
    } | {
        doc_id: {
            "knowledge_id": FILTER_KB,
            "content": f"通用 过滤 测试 {doc_id}",
            "dataset_name": "过滤测试库",
            **fields,
        }
        for doc_id, fields in FILTER_DOCS.items()
    }
    for doc_id, doc in raw_docs.items():
        es_sync.index(
            index=own(alias),
            id=doc_id,
            document={"chunk_id": doc_id, "document_id": doc_id, "tenant": TENANT, **doc},
        )
    es_sync.indices.refresh(index=own(alias))
