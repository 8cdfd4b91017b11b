"""The indexer against the real Elasticsearch: idempotent, incremental, no stale chunk,
bad documents refused, crash-and-rerun converging, and index management."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch
from typer.testing import CliRunner

from indexer import manage, writing
from indexer.chunking import ChunkOptions
from indexer.cli import app as indexer_cli
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.search.index import ensure_index
from retrieval_svc.search.runs import runs_index
from tests.support import ES_URL, SAMPLES, doc_factory
from tests.support.corpus import TENANT, own

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]


async def chunks_of(es: AsyncElasticsearch, alias: str, kb: str) -> dict[str, dict[str, Any]]:
    await es.indices.refresh(index=own(alias))
    resp = await es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=1000)
    return {h["_id"]: h["_source"] for h in resp["hits"]["hits"]}


def opts(alias: str, kb: str, **kw: Any) -> IndexOptions:
    return IndexOptions(knowledge_id=kb, alias=own(alias), tenant=TENANT, **kw)


async def test_second_run_skips_everything(es: AsyncElasticsearch, corpus: str) -> None:
    first = await index_source(es, LocalSource(SAMPLES), opts(corpus, "idem"))
    before = await chunks_of(es, corpus, "idem")
    second = await index_source(es, LocalSource(SAMPLES), opts(corpus, "idem"))
    assert first.ok and second.ok
    assert (first.documents_indexed, first.documents_skipped) == (7, 0)
    assert (second.documents_indexed, second.documents_skipped) == (0, 7)
    assert await chunks_of(es, corpus, "idem") == before
    forced = await index_source(es, LocalSource(SAMPLES), opts(corpus, "idem", force=True))
    assert forced.documents_indexed == 7
    assert set(await chunks_of(es, corpus, "idem")) == set(before)


async def test_changed_document_replaces_all_its_chunks(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    doc = tmp_path / "规程.md"
    doc.write_text("# 一\n\n" + "甲" * 80 + "\n\n# 二\n\n" + "乙" * 80 + "\n\n# 三\n\n丙丙\n")
    (tmp_path / "other.md").write_text("# 其他\n\n不变的文档\n")
    options = opts(corpus, "shrink", chunk=ChunkOptions(max_chars=100))
    await index_source(es, LocalSource(tmp_path), options)
    assert len(await chunks_of(es, corpus, "shrink")) == 4
    doc.write_text("# 一\n\n只剩一段\n")
    report = await index_source(es, LocalSource(tmp_path), options)
    remaining = await chunks_of(es, corpus, "shrink")
    assert (report.documents_indexed, report.documents_skipped) == (1, 1)
    assert report.stale_chunks_deleted == 2
    assert sorted(c["content"] for c in remaining.values()) == ["一\n只剩一段", "其他\n不变的文档"]
    assert len({c["source_etag"] for c in remaining.values()}) == 2


async def test_prune_deletes_documents_whose_object_is_gone(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text(f"# {name}\n\n内容 {name}\n")
    await index_source(es, LocalSource(tmp_path), opts(corpus, "prune"))
    (tmp_path / "b.md").unlink()
    kept = await index_source(es, LocalSource(tmp_path), opts(corpus, "prune"))
    assert kept.documents_pruned == 0 and len(await chunks_of(es, corpus, "prune")) == 3
    pruned = await index_source(es, LocalSource(tmp_path), opts(corpus, "prune", prune=True))
    assert pruned.documents_pruned == 1
    names = sorted(c["document_name"] for c in (await chunks_of(es, corpus, "prune")).values())
    assert names == ["a.md", "c.md"]


async def test_bad_documents_are_reported_and_not_indexed(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    (tmp_path / "good.md").write_text("---\naccess_roles: [物业经理]\n---\n正常文档\n")
    (tmp_path / "bad-acl.md").write_text("---\naccess_roles: '[\"物业经理\",'\n---\n权限写坏\n")
    (tmp_path / "sidecar-bad.md").write_text("另一份文档\n")
    (tmp_path / "sidecar-bad.md.meta.json").write_text('{"access_roles": 42}')
    (tmp_path / "broken-json.md").write_text("第三份\n")
    (tmp_path / "broken-json.md.meta.json").write_text("{not json")
    (tmp_path / "corrupt.pdf").write_bytes(b"%PDF-1.4 truncated garbage")
    (tmp_path / "empty.md").write_text("---\ntitle: 空\n---\n")
    report = await index_source(es, LocalSource(tmp_path), opts(corpus, "badacl"))
    assert not report.ok
    failed = {f["document"]: f["reason"] for f in report.failures}
    assert set(failed) == {
        "bad-acl.md",
        "sidecar-bad.md",
        "broken-json.md",
        "corrupt.pdf",
        "empty.md",
    }
    assert "access_roles" in failed["bad-acl.md"] and "PDF" in failed["corrupt.pdf"]
    stored = await chunks_of(es, corpus, "badacl")
    assert [c["document_name"] for c in stored.values()] == ["good.md"]


async def test_every_format_in_chinese(es: AsyncElasticsearch, corpus: str, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(doc_factory.markdown("title: 巡更指南", "巡更人员打卡。"))
    (tmp_path / "b.txt").write_bytes("配电房巡视记录。".encode("gb18030"))
    (tmp_path / "c.html").write_bytes(doc_factory.html("会议室指南", [("预约", "小程序预约。")]))
    (tmp_path / "d.pdf").write_bytes(doc_factory.pdf(["消防控制室值班制度", "双人值班。"]))
    (tmp_path / "e.docx").write_bytes(doc_factory.docx("电梯维保规程", [("周期", "每15日。")]))
    report = await index_source(es, LocalSource(tmp_path), opts(corpus, "formats"))
    assert report.ok and report.documents_indexed == 5
    titles = {
        c["document_name"]: c["document_title"]
        for c in (await chunks_of(es, corpus, "formats")).values()
    }
    assert titles == {
        "a.md": "巡更指南",
        "b.txt": "b",
        "c.html": "会议室指南",
        "d.pdf": "d",
        "e.docx": "电梯维保规程",
    }


async def test_manifest_and_url_template(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("---\naccess_roles: [甲]\ncategory: a\n---\n正文\n")
    (tmp_path / "docs" / "x.md.meta.json").write_text('{"access_roles": ["乙"], "category": "b"}')
    manifest = {"docs/x.md": {"path": "docs/x.md", "access_roles": "丙,丁", "owner": "王"}}
    options = opts(
        corpus, "manifest", manifest=manifest, url_template="https://files.example.com/kb/{key}"
    )
    await index_source(es, LocalSource(tmp_path), options)
    (chunk,) = (await chunks_of(es, corpus, "manifest")).values()
    assert chunk["access_roles"] == ["丙", "丁"]  # front matter < sidecar < manifest
    assert chunk["metadata"] == {
        "category": "b",
        "owner": "王",
        "format": "markdown",
        "access_roles_from": "manifest",  # what set the roles (design.md §16)
    }
    assert chunk["source_file_url"] == "https://files.example.com/kb/docs/x.md"


def test_bad_url_template_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed"):
        IndexOptions(knowledge_id="k", alias="a", url_template="https://x/{path}")


async def test_dry_run_writes_nothing(es: AsyncElasticsearch, corpus: str) -> None:
    report = await index_source(es, LocalSource(SAMPLES), opts(corpus, "dry", dry_run=True))
    assert report.documents_indexed == 7 and report.chunks_indexed > 7
    assert await chunks_of(es, corpus, "dry") == {}


async def test_crash_then_rerun_converges(
    es: AsyncElasticsearch, corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("\n\n".join(f"# 第{i}节\n\n" + "字" * 90 for i in range(4)))
    options = opts(corpus, "crash", chunk=ChunkOptions(max_chars=100))
    await index_source(es, LocalSource(tmp_path), options)
    assert len(await chunks_of(es, corpus, "crash")) == 4
    # The new version has 2 chunks; the run dies after writing them, before the cleanup.
    doc.write_text("# 新一\n\n新内容一\n\n" + "字" * 90 + "\n\n# 新二\n\n新内容二\n")

    async def die(*_args: object) -> int:
        raise ConnectionError("killed")

    monkeypatch.setattr(writing, "delete_ids", die)
    with pytest.raises(ConnectionError):
        await index_source(es, LocalSource(tmp_path), options)
    mixed = await chunks_of(es, corpus, "crash")
    assert len({c["source_etag"] for c in mixed.values()}) == 2  # half old, half new
    monkeypatch.undo()
    report = await index_source(es, LocalSource(tmp_path), options)
    assert report.documents_indexed == 1, "a document with mixed versions must be redone"
    final = await chunks_of(es, corpus, "crash")
    assert sorted(c["segment_position"] for c in final.values()) == [1, 2]
    assert len({c["source_etag"] for c in final.values()}) == 1
    assert all("新" in c["content"] or "字" in c["content"] for c in final.values())


def test_cli_json_report_and_exit_code(corpus: str, tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("# 标题\n\n正文\n")
    (tmp_path / "broken.md").write_text("---\naccess_roles: {a: 1}\n---\n正文\n")
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    result = CliRunner().invoke(
        indexer_cli, ["index", str(tmp_path), "--knowledge-id", "cli-kb", "--json"], env=env
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["documents_indexed"] == 1
    assert report["failures"][0]["document"] == "broken.md"
    again = CliRunner().invoke(
        indexer_cli, ["index", str(tmp_path / "nope"), "--knowledge-id", "x"], env=env
    )
    assert again.exit_code == 2 and "not a folder" in again.output


def test_cli_stats_delete(corpus: str, es_sync: Any, tmp_path: Path) -> None:
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    (tmp_path / "a.md").write_text("---\naccess_roles: [x]\n---\n甲\n")
    (tmp_path / "b.md").write_text("乙\n")
    runner = CliRunner()
    assert (
        runner.invoke(
            indexer_cli, ["index", str(tmp_path), "--knowledge-id", "del-kb"], env=env
        ).exit_code
        == 0
    )
    stats = json.loads(runner.invoke(indexer_cli, ["stats", "--json"], env=env).stdout)
    text = runner.invoke(indexer_cli, ["stats"], env=env).stdout
    assert "embedding: none (BM25 only)" in text and "del-kb" in text, text
    (kb,) = [k for k in stats["knowledge_bases"] if k["knowledge_id"] == "del-kb"]
    assert (kb["documents"], kb["chunks"], kb["restricted_chunks"]) == (2, 2, 1)
    assert stats["analysis"] in ("cjk", "core")
    runs = runs_index(corpus, "default")
    kept = es_sync.get(index=runs, id="del-kb")["_source"]  # the console's "last run"
    assert (kept["documents_indexed"], kept["documents_failed"], kept["failures"]) == (2, 0, [])
    dry = runner.invoke(indexer_cli, ["delete", "--knowledge-id", "del-kb"], env=env)
    assert "2 chunks match; nothing deleted" in dry.stdout
    done = runner.invoke(indexer_cli, ["delete", "--knowledge-id", "del-kb", "--yes"], env=env)
    assert "deleted 2 chunks" in done.stdout
    assert not es_sync.options(ignore_status=404).get(index=runs, id="del-kb")["found"]
    none = runner.invoke(indexer_cli, ["delete", "--knowledge-id", "del-kb"], env=env)
    assert none.stdout.strip() == "no chunks of default/del-kb match; nothing to delete"


async def test_rebuild_swaps_the_alias(
    es: AsyncElasticsearch, es_sync: Any, tmp_path: Path
) -> None:
    alias = f"rsvc-rebuild-{uuid.uuid4().hex[:8]}"
    mine = own(alias)
    try:
        (tmp_path / "a.md").write_text("# 巡检\n\n巡检内容\n")
        await ensure_index(es, alias, tenant=TENANT)
        await index_source(es, LocalSource(tmp_path), opts(alias, "rb"))
        before = sorted((await es.indices.get_alias(name=mine)).keys())
        out = await manage.rebuild(es, alias, TENANT)
        after = sorted((await es.indices.get_alias(name=mine)).keys())
        assert before == [f"{mine}-000001"] and after == [f"{mine}-000002"] == [out["new"]]
        assert out["chunks"] == 1
        assert not await es.indices.exists(index=f"{mine}-000001")
        assert len(await chunks_of(es, alias, "rb")) == 1
        # The indexer keeps working against the new index: unchanged documents are skipped.
        again = await index_source(es, LocalSource(tmp_path), opts(alias, "rb"))
        assert again.documents_skipped == 1
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-runs.*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")


async def test_rebuild_splits_the_shared_index_of_earlier_versions(
    es: AsyncElasticsearch, es_sync: Any, tmp_path: Path
) -> None:
    """The upgrade path (docs/indexer.md, "Upgrading"): one index behind the alias itself,
    every tenant's chunks in it, becomes an index per tenant; the service refuses to start on
    the old layout, and starts on the new one, answering as before."""
    from retrieval_svc.errors import ConfigurationError
    from retrieval_svc.search.index import analysis_flavour, index_template
    from tests.support import app_client, auth, make_settings

    alias = f"rsvc-legacy-{uuid.uuid4().hex[:8]}"
    body = index_template(alias, await analysis_flavour(es))["template"]
    await es.indices.create(
        index=f"{alias}-000001", aliases={alias: {"is_write_index": True}}, **body
    )
    chunks = {
        "a1": {"tenant": TENANT, "knowledge_id": "kb", "content": "巡检 一"},
        "a2": {"tenant": TENANT, "knowledge_id": "kb", "content": "巡检 二"},
        "o1": {"tenant": "other", "knowledge_id": "kb", "content": "巡检 他"},
        "d1": {"knowledge_id": "kb", "content": "巡检 旧"},  # from before tenants: default's
    }
    for chunk_id, chunk in chunks.items():
        await es.index(index=alias, id=chunk_id, document={"chunk_id": chunk_id, **chunk})
    await es.indices.refresh(index=alias)
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    try:
        with pytest.raises(ConfigurationError, match="retrieval-indexer rebuild"):
            async with app_client(make_settings(alias)):
                pass
        (tmp_path / "a.md").write_text("# 新\n\n新内容\n")
        refused = await asyncio.to_thread(
            CliRunner().invoke,
            indexer_cli,
            ["index", str(tmp_path), "--knowledge-id", "k"],
            env=env,
        )
        assert refused.exit_code == 2 and "retrieval-indexer rebuild" in refused.output
        done = await asyncio.to_thread(CliRunner().invoke, indexer_cli, ["rebuild"], env=env)
        assert done.exit_code == 0, done.output
        for tenant, ids in ((TENANT, {"a1", "a2"}), ("other", {"o1"}), ("default", {"d1"})):
            found = await es.search(index=own(alias, tenant), size=10)
            assert {h["_id"] for h in found["hits"]["hits"]} == ids, tenant
        assert not await es.indices.exists_alias(name=alias)
        assert not await es.indices.exists(index=f"{alias}-000001")
        async with app_client(make_settings(alias)) as c:
            resp = await c.post(
                "/v1/search", json={"query": "巡检", "knowledge_ids": ["kb"]}, headers=auth("anon")
            )
        assert {m["chunk_id"] for m in resp.json()["chunk_metadata"]} == {"a1", "a2"}
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}-*,{alias}.*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")


def test_cli_writes_run_metrics(corpus: str, tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# 甲\n\n内容\n")
    (tmp_path / "docs" / "b.md").write_text("---\naccess_roles: 5\n---\n坏\n")
    out = tmp_path / "indexer.prom"
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    result = CliRunner().invoke(
        indexer_cli,
        [
            "index",
            str(tmp_path / "docs"),
            "--knowledge-id",
            "metrics-kb",
            "--metrics-textfile",
            str(out),
        ],
        env=env,
    )
    assert result.exit_code == 1
    values = {
        (s.name, s.labels.get("outcome")): s.value
        for family in text_string_to_metric_families(out.read_text())
        for s in family.samples
    }
    assert values[("rsvc_indexer_documents", "indexed")] == 1
    assert values[("rsvc_indexer_documents", "failed")] == 1
    assert values[("rsvc_indexer_chunks", "indexed")] == 1
    assert values[("rsvc_indexer_bytes_read", None)] > 0
    assert ("rsvc_indexer_last_success_timestamp_seconds", None) not in values  # it failed


def test_piped_output_is_not_wrapped(corpus: str, tmp_path: Path) -> None:
    name = "salary-" + "x" * 60 + ".md"  # the line is far wider than 80 columns
    (tmp_path / name).write_text('---\naccess_roles: {"a": 1}\n---\n坏\n', encoding="utf-8")
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    result = CliRunner().invoke(
        indexer_cli,
        ["index", str(tmp_path), "--knowledge-id", "wrap-kb", "--tenant", TENANT],
        env=env,
    )
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.strip().startswith("failed")]
    assert name in line and line.rstrip().endswith("got dict"), result.stderr
