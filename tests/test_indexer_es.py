"""The indexer against the real Elasticsearch: idempotent, no stale chunks, bad ACLs refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch
from typer.testing import CliRunner

from indexer.chunking import ChunkOptions
from indexer.cli import app as indexer_cli
from indexer.pipeline import IndexJob, index_folder
from tests.support import ES_URL, SAMPLES

pytestmark = pytest.mark.anyio


async def chunks_of(es: AsyncElasticsearch, alias: str, kb: str) -> dict[str, dict[str, object]]:
    await es.indices.refresh(index=alias)
    resp = await es.search(index=alias, query={"term": {"knowledge_id": kb}}, size=1000)
    return {h["_id"]: h["_source"] for h in resp["hits"]["hits"]}


async def test_reindexing_is_idempotent(es: AsyncElasticsearch, corpus: str) -> None:
    job = IndexJob(source=SAMPLES, knowledge_id="idem", dataset_name="d", alias=corpus)
    first = await index_folder(es, job)
    before = await chunks_of(es, corpus, "idem")
    second = await index_folder(es, job)
    after = await chunks_of(es, corpus, "idem")
    assert first.ok and second.ok
    assert first.documents_indexed == 7
    assert len(before) == first.chunks_indexed
    assert set(after) == set(before)


async def test_a_shrunk_document_leaves_no_stale_chunk(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    doc = tmp_path / "规程.md"
    doc.write_text("# 一\n\n" + "甲" * 80 + "\n\n# 二\n\n" + "乙" * 80 + "\n\n# 三\n\n丙丙\n")
    job = IndexJob(
        source=tmp_path,
        knowledge_id="shrink",
        dataset_name="d",
        alias=corpus,
        options=ChunkOptions(max_chars=100),
    )
    await index_folder(es, job)
    assert len(await chunks_of(es, corpus, "shrink")) == 3
    doc.write_text("# 一\n\n只剩一段\n")
    report = await index_folder(es, job)
    remaining = await chunks_of(es, corpus, "shrink")
    assert report.stale_chunks_deleted == 2
    assert [c["content"] for c in remaining.values()] == ["一\n只剩一段"]


async def test_unreadable_acl_is_reported_and_not_indexed(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    (tmp_path / "good.md").write_text("---\naccess_roles: [物业经理]\n---\n正常文档\n")
    (tmp_path / "bad.md").write_text("---\naccess_roles: '[\"物业经理\",'\n---\n权限写坏的文档\n")
    (tmp_path / "sidecar-bad.md").write_text("另一份文档\n")
    (tmp_path / "sidecar-bad.md.meta.json").write_text('{"access_roles": 42}')
    report = await index_folder(
        es, IndexJob(source=tmp_path, knowledge_id="badacl", dataset_name="d", alias=corpus)
    )
    assert not report.ok
    assert sorted(f["document"] for f in report.failures) == ["bad.md", "sidecar-bad.md"]
    stored = await chunks_of(es, corpus, "badacl")
    assert [c["document_name"] for c in stored.values()] == ["good.md"]


def test_cli_reports_json_and_fails_on_bad_documents(corpus: str, tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("# 标题\n\n正文\n")
    (tmp_path / "broken.md").write_text("---\naccess_roles: {a: 1}\n---\n正文\n")
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus}
    result = CliRunner().invoke(
        indexer_cli,
        ["index", str(tmp_path), "--knowledge-id", "cli-kb", "--json"],
        env=env,
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["documents_indexed"] == 1
    assert report["failures"][0]["document"] == "broken.md"
