"""Never wider than the source (design.md §16): after the source changes the way a company
changes it — a file moved into a restricted folder, a rules file switched, a sidecar edited, a
new version that fails — the next run of the same command, no extra flags, leaves nothing in
the index wider than the source now allows. Against the real Elasticsearch and the suite's
S3-protocol server."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import pytest
from elasticsearch import AsyncElasticsearch
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from tests.support import ES_URL, S3_KEY_ID, S3_SECRET
from tests.support.corpus import TENANT, own

RULES = """
unmatched: {unmatched}
rules:
  - match: 人事/**
    access_roles: [人事]
  - match: Gehälter/**
    access_roles: [hr]
  - match: "**/secret-*.md"
    access_roles: [secret]
  - match: "**"
    access_roles: [{everyone}]
"""


def env(alias: str, s3_server: str = "") -> dict[str, str]:
    return {
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": S3_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_REGION": "us-east-1",
    }


def stored(alias: str, kb: str) -> dict[str, Any]:
    """Each stored document's name → its roles (None: public) as its chunks hold them."""

    async def go() -> dict[str, Any]:
        es = AsyncElasticsearch(ES_URL)
        try:
            await es.indices.refresh(index=own(alias))
            resp = await es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=500)
        finally:
            await es.close()
        out: dict[str, Any] = {}
        for hit in resp["hits"]["hits"]:
            doc = hit["_source"]
            out.setdefault(unicodedata.normalize("NFC", doc["document_name"]), set()).add(
                tuple(doc.get("access_roles") or ())
            )
        return out

    return anyio.run(go)


class Share:
    """A folder of documents with a rules file, indexed by one unchanging command."""

    def __init__(self, root: Path, alias: str, kb: str) -> None:
        self.root, self.alias, self.kb = root / "share", alias, kb
        self.root.mkdir()
        self.rules = root / "acl-rules.yaml"
        self.set_rules("refuse", "员工")

    def set_rules(self, unmatched: str, everyone: str) -> None:
        text = RULES.format(unmatched=unmatched, everyone=everyone)
        self.rules.write_text(text, encoding="utf-8")

    def write(self, key: str, text: str) -> Path:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def index(self, *more: str, source: Path | None = None) -> dict[str, Any]:
        args = ["index", str(source or self.root), "--knowledge-id", self.kb, "--json"]
        args += ["--tenant", TENANT, "--acl-rules", str(self.rules), "--workers", "0", *more]
        run = CliRunner().invoke(indexer_cli, args, env=env(self.alias))
        assert run.exit_code in (0, 1), run.output
        report: dict[str, Any] = json.loads(run.stdout)
        return report


@pytest.fixture
def share(corpus: str, tmp_path: Path, request: pytest.FixtureRequest) -> Share:
    return Share(tmp_path, corpus, f"conv-{request.node.name[-20:]}".lower())


def test_a_document_moved_into_a_restricted_folder_leaves_its_public_place(share: Share) -> None:
    share.write("公共/员工手册.md", "# 员工手册\n\n考勤与休假。")
    first = share.index()
    assert first["ok"] and stored(share.alias, share.kb) == {"公共/员工手册.md": {("员工",)}}
    (share.root / "公共/员工手册.md").rename(share.root / "人事.md")  # (a stray move first)
    (share.root / "人事").mkdir()
    (share.root / "人事.md").rename(share.root / "人事/员工手册.md")
    again = share.index()  # the same command
    assert again["documents_pruned"] == 1 and again["prune_note"].startswith("pruned")
    assert stored(share.alias, share.kb) == {"人事/员工手册.md": {("人事",)}}
    # A run over a part of the source is a source of its own: it prunes only what it wrote.
    share.write("公共/通知.md", "# 通知\n\n停水。")
    part = share.index(source=share.root / "公共")
    assert part["documents_pruned"] == 0 and "other sources' stay" in part["prune_note"]
    assert "人事/员工手册.md" in stored(share.alias, share.kb)


def test_a_document_whose_roles_cannot_be_decided_any_more_is_withdrawn(share: Share) -> None:
    share.set_rules("public", "员工")
    share.write("新部门/计划.md", "# 计划\n\n无人写过规则的文件夹。")  # (matched by "**")
    share.write("公共/制度.md", "# 制度\n\n正文。")
    assert share.index()["ok"]
    # The catch-all goes and unmatched objects are refused: the plan cannot be decided.
    share.rules.write_text(
        RULES.format(unmatched="refuse", everyone="x").replace(
            '  - match: "**"\n    access_roles: [x]\n', "  - match: 公共/**\n    access_roles: []\n"
        ),
        encoding="utf-8",
    )
    switched = share.index()
    assert switched["documents_withdrawn"] == 1 and not switched["ok"]
    (failure,) = switched["failures"]
    assert failure["document"] == "新部门/计划.md" and "withdrawn" in failure["reason"]
    assert stored(share.alias, share.kb) == {"公共/制度.md": {()}}
    # A public document's new version names 人事 in a form that cannot be read: withdrawn.
    share.write("公共/制度.md", '---\naccess_roles: "[人事"\n---\n# 制度\n\n新版。')
    broken = share.index()
    assert broken["documents_withdrawn"] == 1, broken["failures"]
    assert stored(share.alias, share.kb) == {}
    # Mended, it comes back with the roles it names.
    share.write("公共/制度.md", "---\naccess_roles: [人事]\n---\n# 制度\n\n新版。")
    mended = share.index()
    assert [f["document"] for f in mended["failures"]] == ["新部门/计划.md"]  # (still refused)
    assert mended["documents_withdrawn"] == 0  # (nothing of it left to withdraw)
    assert stored(share.alias, share.kb) == {"公共/制度.md": {("人事",)}}


def test_a_sidecar_edit_is_seen_without_force(share: Share) -> None:
    share.set_rules("public", "员工")
    share.write("公共/薪酬说明.md", "# 薪酬\n\n正文不变。")
    share.write("公共/薪酬说明.md.meta.json", json.dumps({"access_roles": []}))
    assert share.index()["ok"]
    assert stored(share.alias, share.kb) == {"公共/薪酬说明.md": {()}}
    share.write("公共/薪酬说明.md.meta.json", json.dumps({"access_roles": ["人事"]}))
    again = share.index()
    assert (again["documents_retagged"], again["documents_skipped"]) == (1, 0), again
    assert stored(share.alias, share.kb) == {"公共/薪酬说明.md": {("人事",)}}
    share.write("公共/薪酬说明.md.meta.json", "{not json")  # now unreadable: withdrawn
    assert share.index()["documents_withdrawn"] == 1
    assert stored(share.alias, share.kb) == {}


def test_names_that_look_alike_match_alike(share: Share) -> None:
    nfd = unicodedata.normalize("NFD", "Gehälter")
    assert nfd != "Gehälter"
    share.write(f"{nfd}/2026.md", "# Gehälter\n\nTabelle.")  # (as macOS writes it)
    share.write("secret-root.md", "# 机密\n\n根目录下的文件。")
    share.write("a/secret-deep.md", "# 机密\n\n子目录下的文件。")
    assert share.index()["ok"]
    assert stored(share.alias, share.kb) == {
        "Gehälter/2026.md": {("hr",)},
        "secret-root.md": {("secret",)},
        "a/secret-deep.md": {("secret",)},
    }


def test_object_keys_are_kept_exactly_and_a_bucket_sidecar_edit_is_seen(
    corpus: str, bucket: tuple[Any, str], s3_server: str, tmp_path: Path
) -> None:
    client, name = bucket
    rules = tmp_path / "rules.yaml"
    rules.write_text("unmatched: refuse\nrules:\n  - {match: '**', access_roles: []}\n")
    for key, body in [
        ("docs/fin/a.md", "# 甲\n\n正文一。"),
        ("docs//fin/a.md", "# 乙\n\n另一个对象。"),
        ("docs/b.md", "# 丙\n\n正文。"),
        ("docs/b.md-notes.md", "# 丁\n\n排在文档与附属文件之间。"),
        ("docs/b.md.meta.json", json.dumps({"access_roles": []})),
    ]:
        client.put_object(Bucket=name, Key=key, Body=body.encode())
    args = ["index", f"s3://{name}/docs", "--knowledge-id", "conv-s3", "--tenant", TENANT]
    args += ["--acl-rules", str(rules), "--json", "--workers", "0"]
    first = json.loads(CliRunner().invoke(indexer_cli, args, env=env(corpus, s3_server)).stdout)
    assert first["passed_over"] == {
        "an empty, '.' or '..' folder in the key (docs//a.md): rename the object": 1
    }
    docs = stored(corpus, "conv-s3")
    assert sorted(docs) == ["b.md", "b.md-notes.md", "fin/a.md"]
    client.put_object(
        Bucket=name, Key="docs/b.md.meta.json", Body=json.dumps({"access_roles": ["财务"]})
    )
    run = CliRunner().invoke(indexer_cli, args, env=env(corpus, s3_server))
    second = json.loads(run.stdout)
    assert (second["documents_retagged"], second["documents_skipped"]) == (1, 2), second
    assert stored(corpus, "conv-s3")["b.md"] == {("财务",)}


def test_a_rules_change_that_moved_roles_is_in_the_permission_history(
    share: Share, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase

    db = f"sqlite:///{tmp_path / 'policy.db'}"
    share.write("人事/考勤.md", "# 考勤\n\n正文。")
    share.write("公共/通知.md", "# 通知\n\n正文。")

    def index() -> dict[str, Any]:
        args = ["index", str(share.root), "--knowledge-id", share.kb, "--json", "--workers", "0"]
        args += ["--tenant", TENANT, "--acl-rules", str(share.rules)]
        run = CliRunner().invoke(
            indexer_cli, args, env={**env(share.alias), "RSVC_CASBIN_DB_URL": db}
        )
        assert run.exit_code == 0, run.output
        report: dict[str, Any] = json.loads(run.stdout)
        return report

    index()
    assert index()["documents_skipped"] == 2  # (the same rules: no event)
    share.rules.write_text(
        share.rules.read_text(encoding="utf-8").replace("[人事]", "[人事, 人事经理]"),
        encoding="utf-8",
    )
    changed = index()
    assert changed["documents_retagged"] == 1 and changed["roles_changed"] == ["人事/考勤.md"]
    events = PolicyDatabase(DEFAULT_MODEL, db).history(since=datetime(2000, 1, 1, tzinfo=UTC))
    (event,) = events
    assert (event.actor, event.source, event.action) == (
        "indexer:acl-rules.yaml",
        "indexer",
        "rules-changed",
    )
    assert "1 re-tagged, 0 withdrawn" in event.detail and "人事/考勤.md" in event.detail


def test_lock_files_and_excluded_objects_are_passed_over_and_the_run_is_clean(
    share: Share,
) -> None:
    share.set_rules("public", "员工")
    share.rules.write_text(
        share.rules.read_text(encoding="utf-8").replace(
            "rules:\n", 'exclude: ["**/临时/**"]\nrules:\n', 1
        ),
        encoding="utf-8",
    )
    share.write("公共/员工手册.md", "# 员工手册\n\n正文。")
    share.write("公共/旧版/手册-2019.md", "# 旧版\n\n已作废。")
    junk = ["公共/~$员工手册.docx", "公共/.~lock.员工手册.docx#", "公共/~WRL0001.tmp"]
    junk += ["公共/Thumbs.db", ".DS_Store", "公共/desktop.ini", "人事/临时/草稿.md"]
    for key in junk:
        share.write(key, "x")
    first = share.index()
    assert first["ok"], first["failures"]
    assert first["passed_over"] == {
        "a lock, temporary or system file": 6,
        "excluded (exclude of acl-rules.yaml)": 1,
    }
    assert set(stored(share.alias, share.kb)) == {"公共/旧版/手册-2019.md", "公共/员工手册.md"}
    # The old version is excluded from now on: it leaves the index at the next run.
    again = share.index("--exclude", "**/旧版/**")
    assert again["ok"] and again["passed_over"]["excluded (--exclude)"] == 1
    assert again["documents_pruned"] == 1
    assert sorted(stored(share.alias, share.kb)) == ["公共/员工手册.md"]
    bad = CliRunner().invoke(
        indexer_cli,
        ["index", str(share.root), "--knowledge-id", share.kb, "--exclude", "/abs/**"],
        env=env(share.alias),
    )
    assert bad.exit_code == 2 and "starts with '/'" in bad.output, bad.output


def test_shards_partition_a_source_and_prune_only_their_own(share: Share) -> None:
    share.set_rules("public", "员工")
    for i in range(30):
        share.write(f"公共/文档-{i:02d}.md", f"# 文档 {i}\n\n第 {i} 份说明。")
    reports = [share.index("--shard", f"{i}/3") for i in range(3)]
    assert sum(r["documents_seen"] for r in reports) == 30  # each counts its own share
    assert all(0 < r["documents_indexed"] < 30 for r in reports)
    assert len(stored(share.alias, share.kb)) == 30
    # A deleted object: only its own shard prunes it; the others never touch it.
    (share.root / "公共/文档-07.md").unlink()
    again = [share.index("--shard", f"{i}/3") for i in range(3)]
    assert sum(r["documents_pruned"] for r in again) == 1
    assert sum(r["documents_seen"] for r in again) == 29
    assert len(stored(share.alias, share.kb)) == 29
    for bad in ("3/3", "-1/3", "1/0", "x"):
        run = CliRunner().invoke(
            indexer_cli,
            ["index", str(share.root), "--knowledge-id", "never-made", "--shard", bad],
            env={**env("rsvc-test-never-made")},
        )
        assert run.exit_code == 2 and len(run.stderr.strip().splitlines()) == 1, run.output
    import elasticsearch

    client = elasticsearch.Elasticsearch(ES_URL)
    try:
        assert not client.indices.get(index="rsvc-test-never-made*")  # nothing written
    finally:
        client.close()


def test_shards_starting_at_once_on_a_new_alias_all_succeed(tmp_path: Path) -> None:
    # One creates the index; the others wait for its primaries (Elasticsearch calls a new
    # index with initializing primaries yellow: waiting for yellow let 3 of 32 runs fail).
    import subprocess
    import sys
    import uuid

    import elasticsearch

    folder = tmp_path / "share"
    folder.mkdir()
    for i in range(24):
        (folder / f"d{i:02d}.md").write_text(f"# 文档 {i}\n\n第 {i} 份。", encoding="utf-8")
    alias = f"rsvc-test-race-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-c", "from indexer.cli import app; app()", "index", str(folder),
               "--knowledge-id", "race", "--workers", "0", "--tenant", TENANT]  # fmt: skip
    shards = [
        subprocess.Popen([*command, "--shard", f"{i}/4"], env={**os.environ, **env(alias)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(4)
    ]  # fmt: skip
    said = [p.communicate(timeout=300)[1].decode() for p in shards]
    failed = [text for p, text in zip(shards, said, strict=True) if p.returncode != 0]
    client = elasticsearch.Elasticsearch(ES_URL)
    try:
        assert not failed, failed
        client.indices.refresh(index=own(alias))
        found = client.count(index=own(alias), query={"term": {"knowledge_id": "race"}})
        assert found["count"] == 24
    finally:
        client.options(ignore_status=404).indices.delete(index=f"{alias}*")
        client.close()
