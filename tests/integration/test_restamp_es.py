"""A change of roles alone is re-stamped from the index, not read again (issue #55 §1: "a
change to acl-rules.yaml re-tags what it affects, without re-reading content").

Against the real Elasticsearch, with the local model's real vectors: a rules edit and a
sidecar edit re-tag documents without a single read of their bytes; what they write is what a
``--force`` run that reads and embeds everything writes; chunks written before chunks kept what
their bytes gave are read again; a document the new rules refuse is withdrawn, unread.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from indexer.permissions import parse_rules
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource, ObjectRef
from retrieval_svc.embedding.local import LocalEmbedder
from retrieval_svc.search.index import ensure_index, template_name
from tests.support import doc_factory
from tests.support.corpus import TENANT, own

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

KB = "restamp"
RULES = """
unmatched: {unmatched}
rules:
  - match: 公共/**
    access_roles: [{public}]
  - match: 法务/**
    access_roles: [{legal}]
"""
LONG = "物业服务中心应每日巡检配电房、水泵房与电梯机房，记录设备运行参数与异常情况。" * 12


class Counting(LocalSource):
    """A folder that remembers which objects' bytes were read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, ref: ObjectRef) -> bytes:
        self.reads.append(ref.key)
        return super().read(ref)


def write_share(root: Path) -> None:
    (root / "公共").mkdir(parents=True)
    (root / "法务").mkdir()
    front = "title: 员工手册\n部门: 行政\n生效: 2026-03-01\nreviewed: 2026-03-01T09:30:00"
    body = f"# 手册\n\n## 第一章 总则\n\n{LONG}\n\n## 第二章 巡检\n\n{LONG}\n"
    (root / "公共" / "手册.md").write_bytes(doc_factory.markdown(front, body))
    sections = [("维保周期", LONG), ("应急处置", "困人时先安抚乘客，再通知维保单位。")]
    (root / "公共" / "电梯.docx").write_bytes(doc_factory.docx(doc_factory.DOCX_TITLE, sections))
    (root / "公共" / "说明.md").write_text("没有标题的一段说明文字，讲访客登记。", "utf-8")
    (root / "公共" / "说明.md.meta.json").write_text(json.dumps({"部门": "安保"}), "utf-8")
    (root / "法务" / "合同.md").write_text("# 物业服务合同\n\n甲方与乙方约定服务范围。", "utf-8")


def options(alias: str, rules: str, **kwargs: Any) -> IndexOptions:
    return IndexOptions(
        knowledge_id=KB,
        alias=own(alias),
        tenant=TENANT,
        acl_rules=parse_rules(rules, "acl-rules.yaml"),
        **kwargs,
    )


async def chunks(es: AsyncElasticsearch, alias: str) -> dict[str, dict[str, Any]]:
    await es.indices.refresh(index=own(alias))
    resp = await es.search(index=own(alias), query={"term": {"knowledge_id": KB}}, size=100)
    return {h["_id"]: h["_source"] for h in resp["hits"]["hits"]}


def without(chunk: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in chunk.items() if k not in keys}


@pytest.fixture
async def alias(es: AsyncElasticsearch) -> AsyncIterator[str]:
    name = f"rsvc-test-restamp-{uuid.uuid4().hex[:8]}"
    yield name
    await es.options(ignore_status=404).indices.delete(index=f"{name}.*")
    await es.options(ignore_status=404).indices.delete_index_template(name=template_name(name))


async def test_roles_changed_outside_the_bytes_are_restamped_unread_as_a_read_would(
    es: AsyncElasticsearch, alias: str, tmp_path: Path
) -> None:
    root = tmp_path / "share"
    write_share(root)
    embedder = LocalEmbedder()
    embedder.load()
    await ensure_index(es, alias, await embedder.describe(), tenant=TENANT)
    rules_v1 = RULES.format(unmatched="refuse", public="", legal="法务")
    first = await index_source(es, Counting(root), options(alias, rules_v1), embedder=embedder)
    assert first.ok and first.documents_indexed == 4, first.failures
    before = await chunks(es, alias)
    assert all("from_bytes" in c for c in before.values())

    # A rules edit (公共 now for 员工, 法务 for two roles) and a sidecar that now names roles.
    rules_v2 = RULES.format(unmatched="refuse", public="员工", legal="法务, 董事会")
    sidecar = root / "公共" / "说明.md.meta.json"
    sidecar.write_text(json.dumps({"部门": "安保", "access_roles": ["安保"]}), "utf-8")
    source = Counting(root)
    second = await index_source(es, source, options(alias, rules_v2), embedder=embedder)
    assert second.ok, second.failures
    assert source.reads == [], "a change of roles alone read the documents again"
    assert (second.documents_retagged, second.chunks_embedded) == (4, 0)
    restamped = await chunks(es, alias)
    assert set(restamped) == set(before)
    for chunk_id, chunk in restamped.items():
        was = before[chunk_id]
        assert chunk["embedding"] == was["embedding"]  # the vectors kept, not recomputed
        assert chunk["content"] == was["content"] and chunk["from_bytes"] == was["from_bytes"]
    by_name = {c["document_name"]: c for c in restamped.values()}
    assert by_name["公共/手册.md"]["access_roles"] == ["员工"]
    assert by_name["法务/合同.md"]["access_roles"] == ["法务", "董事会"]
    assert by_name["公共/说明.md"]["access_roles"] == ["安保"]
    assert by_name["公共/说明.md"]["metadata"]["access_roles_from"] == "sidecar"
    assert by_name["公共/手册.md"]["document_title"] == "员工手册"  # (front matter, kept)
    assert by_name["公共/电梯.docx"]["document_title"] == doc_factory.DOCX_TITLE

    # What a run that reads, parses and embeds everything writes: the same, field for field.
    forced = await index_source(
        es, Counting(root), options(alias, rules_v2, force=True), embedder=embedder
    )
    assert forced.ok and forced.chunks_embedded == len(before)
    read_again = await chunks(es, alias)
    assert set(read_again) == set(restamped)
    for chunk_id, chunk in read_again.items():
        assert without(chunk, "indexed_at", "embedding") == without(
            restamped[chunk_id], "indexed_at", "embedding"
        ), chunk["document_name"]


async def test_chunks_without_what_their_bytes_gave_are_read_and_a_refused_one_withdrawn(
    es: AsyncElasticsearch, alias: str, tmp_path: Path
) -> None:
    root = tmp_path / "share"
    write_share(root)
    await ensure_index(es, alias, tenant=TENANT)
    rules_v1 = RULES.format(unmatched="refuse", public="", legal="法务")
    assert (await index_source(es, Counting(root), options(alias, rules_v1))).ok
    # As an index written before chunks kept what their bytes gave (the integ-test
    # distribution has no _update_by_query: written back without it).
    for chunk_id, chunk in (await chunks(es, alias)).items():
        if chunk["document_name"] == "公共/手册.md":
            await es.index(index=own(alias), id=chunk_id, document=without(chunk, "from_bytes"))
    await es.indices.refresh(index=own(alias))
    rules_v2 = RULES.format(unmatched="refuse", public="员工", legal="法务")
    source = Counting(root)
    second = await index_source(es, source, options(alias, rules_v2))
    assert second.ok and second.documents_retagged == 3, second.failures
    assert source.reads == ["公共/手册.md"]  # (the others re-stamped, unread)
    handbook = [
        c for c in (await chunks(es, alias)).values() if c["document_name"] == "公共/手册.md"
    ]
    assert all(c["access_roles"] == ["员工"] and "from_bytes" in c for c in handbook)

    # 法务's rule gone and unmatched objects refused: the contract is withdrawn, not read.
    rules_v3 = "unmatched: refuse\nrules:\n  - match: 公共/**\n    access_roles: [员工]\n"
    source = Counting(root)
    third = await index_source(es, source, options(alias, rules_v3))
    assert source.reads == []
    assert [f["document"] for f in third.failures] == ["法务/合同.md"]
    assert third.documents_withdrawn == 1
    assert "法务/合同.md" not in {c["document_name"] for c in (await chunks(es, alias)).values()}
