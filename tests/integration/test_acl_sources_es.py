"""Permissions from where they live (issue #35 §1, §2, §6): folder rules and object tags,
against the real Elasticsearch and the suite's real S3-protocol server (moto on loopback).
A changed rule or tag re-tags the chunks in place — the vectors stay, nothing is re-embedded."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from indexer.permissions import parse_rules
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import ObjectRef, ObjectStoreOptions, ObjectStoreSource
from retrieval_svc.embedding.local import LocalEmbedder
from retrieval_svc.search.index import ensure_index, template_name
from tests.support import ES_URL, S3_KEY_ID, S3_SECRET
from tests.support.corpus import TENANT, own

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

KEY_ID, SECRET = S3_KEY_ID, S3_SECRET
RULES = """
unmatched: refuse
rules:
  - match: finance/**
    access_roles: [finance]
  - match: hr/薪酬/*.csv
    access_roles: [薪酬专员]
    override: true
  - match: public/**
    access_roles: []
"""


def put(client: Any, bucket: str, key: str, body: str, tags: dict[str, str] | None = None) -> None:
    extra = {"Tagging": urlencode(tags)} if tags else {}  # (x-amz-tagging is URL-encoded)
    client.put_object(Bucket=bucket, Key=key, Body=body.encode(), **extra)


async def stored(es: AsyncElasticsearch, alias: str, kb: str) -> dict[str, dict[str, Any]]:
    await es.indices.refresh(index=own(alias))
    resp = await es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=100)
    return {h["_source"]["document_name"]: h["_source"] for h in resp["hits"]["hits"]}


def env(s3_server: str, alias: str) -> dict[str, str]:
    return {
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
    }


def test_a_bucket_takes_its_roles_from_rules_and_tags_with_no_per_file_metadata(
    corpus: str, bucket: tuple[Any, str], s3_server: str, tmp_path: Path
) -> None:
    client, name = bucket
    put(client, name, "finance/2026/预算.md", "# 预算\n\n年度预算草案。")
    put(
        client, name, "finance/审计报告.md", "# 审计\n\n审计意见。", {"access_roles": "审计 董事会"}
    )
    put(client, name, "hr/薪酬/2026.csv", "姓名,月薪\n张三,100\n")
    # The document says it is public: the override rule wins.
    put(client, name, "hr/薪酬/2026.csv.meta.json", json.dumps({"access_roles": []}))
    put(client, name, "public/手册.md", "# 手册\n\n员工手册。")
    put(client, name, "新部门/计划.md", "# 计划\n\n无人写过规则的新文件夹。")
    put(client, name, "finance/坏标签.md", "# 坏\n\n正文", {"access_roles": "a=b@c user:bob"})
    rules = tmp_path / "acl-rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    args = ["index", f"s3://{name}", "--knowledge-id", "acl-s3", "--tenant", TENANT, "--json"]
    args += ["--acl-rules", str(rules), "--roles-tag", "access_roles"]  # (worker processes)
    first = CliRunner().invoke(indexer_cli, args, env=env(s3_server, corpus))
    assert first.exit_code == 1, first.output  # the new folder and the bad tag failed
    report = json.loads(first.stdout)
    failures = {f["document"]: f["reason"] for f in report["failures"]}
    assert sorted(failures) == ["finance/坏标签.md", "新部门/计划.md"]
    assert "unmatched: refuse" in failures["新部门/计划.md"]
    assert "names a user" in failures["finance/坏标签.md"]
    docs = anyio_run(stored, corpus, "acl-s3")
    acl = {
        k: (d.get("access_roles"), d["metadata"].get("access_roles_from")) for k, d in docs.items()
    }
    assert acl == {
        "finance/2026/预算.md": (["finance"], "rule (finance/**) of acl-rules.yaml"),
        "finance/审计报告.md": (["审计", "董事会"], "tag access_roles"),  # the tag is more specific
        "hr/薪酬/2026.csv": (["薪酬专员"], "rule (hr/薪酬/*.csv, override) of acl-rules.yaml"),
        "public/手册.md": (None, "rule (public/**) of acl-rules.yaml"),
    }
    # A rule changes and a tag changes: the next run re-tags those documents in place.
    rules.write_text(RULES.replace("[finance]", "[finance, 财务总监]"), encoding="utf-8")
    client.put_object_tagging(
        Bucket=name,
        Key="finance/审计报告.md",
        Tagging={"TagSet": [{"Key": "access_roles", "Value": "审计"}]},
    )
    second = CliRunner().invoke(indexer_cli, args, env=env(s3_server, corpus))
    again = json.loads(second.stdout)
    assert (again["documents_retagged"], again["documents_indexed"]) == (2, 0), second.output
    assert again["documents_skipped"] == 2  # the csv and the handbook: nothing changed
    docs = anyio_run(stored, corpus, "acl-s3")
    assert docs["finance/2026/预算.md"]["access_roles"] == ["finance", "财务总监"]
    assert docs["finance/审计报告.md"]["access_roles"] == ["审计"]


def anyio_run(fn: Any, *args: Any) -> Any:
    import anyio

    async def go() -> Any:
        es = AsyncElasticsearch(ES_URL)
        try:
            return await fn(es, *args)
        finally:
            await es.close()

    return anyio.run(go)


def test_a_malformed_rules_file_stops_the_run_before_anything_is_written(
    corpus: str, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# 甲\n\n正文", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - match: '**'\n    access_roles: [staff]\n", encoding="utf-8")
    args = ["index", str(folder), "--knowledge-id", "acl-bad", "--tenant", TENANT]
    run = CliRunner().invoke(indexer_cli, [*args, "--acl-rules", str(rules)], env=env("", corpus))
    assert run.exit_code == 2 and "unmatched: refuse" in run.output, run.output
    tagged = CliRunner().invoke(
        indexer_cli, [*args, "--roles-tag", "access_roles"], env=env("", corpus)
    )
    assert tagged.exit_code == 2 and "s3:// or oss://" in tagged.output, tagged.output
    assert anyio_run(stored, corpus, "acl-bad") == {}
    # A catch-all first: every later rule is dead, and the run says so.
    rules.write_text(
        "unmatched: refuse\nrules:\n  - {match: '**', access_roles: [staff]}\n"
        "  - {match: finance/**, access_roles: [finance]}\n",
        encoding="utf-8",
    )
    warned = CliRunner().invoke(
        indexer_cli, [*args, "--acl-rules", str(rules)], env=env("", corpus)
    )
    assert warned.exit_code == 0, warned.output
    assert "rule 2 (finance/**) can never match" in warned.output
    assert "rule 2 (finance/**) matched no object in this run" in warned.output
    assert anyio_run(stored, corpus, "acl-bad")["a.md"]["access_roles"] == ["staff"]


class _Vanishing(ObjectStoreSource):
    """A real bucket whose object is deleted between its listing and its tag read (as a
    concurrent writer would): the server's own error, not a stand-in."""

    def __init__(self, url: str, options: ObjectStoreOptions, client: Any, doomed: str) -> None:
        super().__init__(url, options)
        self.s3, self.doomed = client, doomed

    def tags(self, ref: ObjectRef) -> dict[str, str]:
        if ref.key == self.doomed:
            self.s3.delete_object(Bucket=self.bucket, Key=ref.key)
        return super().tags(ref)


async def test_a_tag_that_cannot_be_read_fails_the_document_and_rules_retag_without_embedding(
    es: AsyncElasticsearch, es_sync: Elasticsearch, bucket: tuple[Any, str], s3_server: str
) -> None:
    client, name = bucket
    corpus = f"rsvc-test-retag-{uuid.uuid4().hex[:8]}"  # an index with the vector field
    put(client, name, "finance/a.md", "# 甲\n\n预算执行情况说明。", {"access_roles": "finance"})
    put(client, name, "finance/gone.md", "# 乙\n\n将被删除。", {"access_roles": "finance"})
    options = ObjectStoreOptions(
        endpoint=s3_server, region="us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET
    )
    source = _Vanishing(f"s3://{name}", options, client, "finance/gone.md")
    embedder = LocalEmbedder()
    embedder.load()
    await ensure_index(es, corpus, await embedder.describe(), tenant=TENANT)
    try:
        await _index_twice(es, corpus, client, name, source, embedder)
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{corpus}.*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=template_name(corpus))


async def _index_twice(
    es: AsyncElasticsearch, corpus: str, client: Any, name: str, source: Any, embedder: Any
) -> None:
    rules = parse_rules(RULES, "rules.yaml")
    run = IndexOptions(
        knowledge_id="acl-embed", alias=own(corpus), tenant=TENANT, roles_tag="access_roles"
    )
    first = await index_source(es, source, run, embedder=embedder)
    assert [f["document"] for f in first.failures] == ["finance/gone.md"]
    assert "tag access_roles cannot be read" in first.failures[0]["reason"]
    assert first.chunks_embedded == 1
    before = await stored(es, corpus, "acl-embed")
    assert list(before) == ["finance/a.md"]  # the unread one is not published
    # Rules now apply (below the tag); a removed tag leaves the rule to decide.
    client.delete_object_tagging(Bucket=name, Key="finance/a.md")
    second = await index_source(
        es,
        source,
        IndexOptions(
            knowledge_id="acl-embed",
            alias=own(corpus),
            tenant=TENANT,
            roles_tag="access_roles",
            acl_rules=rules,
        ),
        embedder=embedder,
    )
    assert (second.documents_retagged, second.chunks_embedded) == (1, 0)
    after = (await stored(es, corpus, "acl-embed"))["finance/a.md"]
    assert after["metadata"]["access_roles_from"] == "rule (finance/**) of rules.yaml"
    assert after["embedding"] == before["finance/a.md"]["embedding"]  # the vector kept
    assert after["content_hash"] == before["finance/a.md"]["content_hash"]
