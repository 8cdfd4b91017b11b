"""The indexer reading oss:// and s3:// from a real S3-protocol server (moto, on loopback)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import ObjectStoreOptions, ObjectStoreSource
from tests.support import ES_URL, S3_KEY_ID, S3_SECRET, doc_factory
from tests.support.corpus import TENANT, own

pytestmark = pytest.mark.anyio

KEY_ID, SECRET = S3_KEY_ID, S3_SECRET


def put(client: Any, bucket: str, key: str, body: bytes | str) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)


def load_bucket(client: Any, bucket: str) -> None:
    """Chinese documents of every format, with every access_roles form."""
    put(client, bucket, "kb/巡更.md", doc_factory.markdown("title: 巡更指南", "巡更人员打卡。"))
    put(client, bucket, "kb/配电.txt", "配电房倒闸操作须两人进行。".encode("gb18030"))
    put(
        client,
        bucket,
        "kb/配电.txt.meta.json",
        json.dumps({"access_roles": ["运维工程师", "物业经理"]}),
    )
    put(
        client, bucket, "kb/会议室.html", doc_factory.html("会议室指南", [("预约", "小程序预约。")])
    )
    put(client, bucket, "kb/会议室.html.meta.json", '{"access_roles": null}')
    put(client, bucket, "kb/消防.pdf", doc_factory.pdf(["消防控制室值班制度", "双人值班。"]))
    put(client, bucket, "kb/消防.pdf.meta.json", json.dumps({"access_roles": '["消防值班员"]'}))
    put(client, bucket, "kb/电梯.docx", doc_factory.docx("电梯维保规程", [("周期", "每15日。")]))
    put(client, bucket, "kb/电梯.docx.meta.json", '{"access_roles": "运维工程师,物业经理"}')
    put(
        client,
        bucket,
        "kb/费用.md",
        doc_factory.markdown("access_roles: '[]'", "物业费按季度预收。"),
    )
    put(client, bucket, "kb/坏.pdf", b"%PDF-1.4 broken")
    put(client, bucket, "kb/坏权限.md", doc_factory.markdown("access_roles: '[\"a\",'", "x"))
    put(client, bucket, "kb/图纸.dwg", b"AC1032")  # a format the indexer does not read
    put(client, bucket, "other/不在前缀下.md", "不应被索引")


async def stored(es: AsyncElasticsearch, alias: str, kb: str) -> dict[str, dict[str, Any]]:
    await es.indices.refresh(index=own(alias))
    resp = await es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=1000)
    return {h["_source"]["document_name"]: h["_source"] for h in resp["hits"]["hits"]}


async def test_oss_every_format_and_acl_form(
    es: AsyncElasticsearch,
    corpus: str,
    bucket: tuple[Any, str],
    s3_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, name = bucket
    load_bucket(client, name)
    monkeypatch.setenv("OSS_ENDPOINT", s3_server)
    monkeypatch.setenv("OSS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("OSS_ACCESS_KEY_SECRET", SECRET)
    source = ObjectStoreSource(f"oss://{name}/kb/", page_size=2)  # several listing pages
    report = await index_source(
        es, source, IndexOptions(knowledge_id="oss-kb", alias=own(corpus), tenant=TENANT)
    )
    assert sorted(f["document"] for f in report.failures) == ["坏.pdf", "坏权限.md"]
    assert report.documents_seen == 8  # sidecars, the drawing and other/ are not documents
    docs = await stored(es, corpus, "oss-kb")
    acl = {doc: chunk.get("access_roles") for doc, chunk in docs.items()}
    assert acl == {
        "巡更.md": None,
        "配电.txt": ["运维工程师", "物业经理"],
        "会议室.html": None,
        "消防.pdf": ["消防值班员"],
        "电梯.docx": ["运维工程师", "物业经理"],
        "费用.md": None,
    }
    assert docs["消防.pdf"]["source_file_url"] == f"oss://{name}/kb/消防.pdf"
    assert "双人值班" in docs["消防.pdf"]["content"]
    assert "倒闸操作" in docs["配电.txt"]["content"]
    assert docs["巡更.md"]["source_etag"]  # the object's ETag, for incremental runs


async def test_s3_changed_and_deleted_objects(
    es: AsyncElasticsearch, corpus: str, bucket: tuple[Any, str], s3_server: str
) -> None:
    client, name = bucket
    put(client, name, "a.md", "# 甲\n\n第一版")
    put(client, name, "b.md", "# 乙\n\n不变")
    put(client, name, "c.md", "# 丙\n\n将被删除")
    options = ObjectStoreOptions(
        endpoint=s3_server, region="us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET
    )
    source = ObjectStoreSource(f"s3://{name}", options)
    first = await index_source(
        es, source, IndexOptions(knowledge_id="s3-kb", alias=own(corpus), tenant=TENANT)
    )
    assert first.ok and first.documents_indexed == 3
    put(client, name, "a.md", "# 甲\n\n第二版")
    client.delete_object(Bucket=name, Key="c.md")
    second = await index_source(
        es, source, IndexOptions(knowledge_id="s3-kb", alias=own(corpus), tenant=TENANT, prune=True)
    )
    assert (second.documents_indexed, second.documents_skipped, second.documents_pruned) == (
        1,
        1,
        1,
    )
    docs = await stored(es, corpus, "s3-kb")
    assert sorted(docs) == ["a.md", "b.md"]
    assert docs["a.md"]["content"] == "甲\n第二版"


def test_cli_reads_oss_with_the_names_oss_users_know(
    corpus: str, bucket: tuple[Any, str], s3_server: str
) -> None:
    client, name = bucket
    put(client, name, "docs/x.md", "# 标题\n\n正文")
    env = {
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": corpus,
        "RSVC_EMBEDDER": "none",
        "OSS_ENDPOINT": s3_server,
        "OSS_ACCESS_KEY_ID": KEY_ID,
        "OSS_ACCESS_KEY_SECRET": SECRET,
    }
    result = CliRunner().invoke(
        indexer_cli, ["index", f"oss://{name}/docs", "--knowledge-id", "oss-cli", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["documents_indexed"] == 1
    missing = CliRunner().invoke(
        indexer_cli,
        ["index", f"oss://{name}/docs", "--knowledge-id", "x"],
        env={"RSVC_ES_URL": ES_URL},
    )
    assert missing.exit_code == 2 and "OSS_" in missing.output
