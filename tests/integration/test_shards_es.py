"""Past one machine (issue #49): four shard processes over a 20,000-object share under folder
rules build the same index as one run, chunk for chunk — on the first load with a shard killed
mid-run and restarted, and again after the share changed the way shares change (objects added,
edited, moved to another department, deleted, given a sidecar naming other roles) with another
shard killed. Real processes (the CLI, killed with SIGKILL between two of its bulk requests),
the suite's Elasticsearch."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from bench.indexing.convergence import change
from bench.permissions.acl_rules import rules_text, write_objects
from indexer.permissions import parse_rules
from tests.support import ES_URL
from tests.support.corpus import TENANT, own
from tests.support.tcp_proxy import killed_at_bulk

OBJECTS = 20_000
SHARDS = 4
KB = "share"


@pytest.fixture
def aliases(es_sync: Elasticsearch) -> Iterator[tuple[str, str]]:
    """Two aliases: one run's index, and the shards' index."""
    tag = uuid.uuid4().hex[:8]
    pair = (f"rsvc-test-one-{tag}", f"rsvc-test-shards-{tag}")
    yield pair
    for alias in pair:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")


def command(source: Path, rules: Path, *more: str) -> list[str]:
    return [sys.executable, "-c", "from indexer.cli import app; app()", "index", str(source),
            "--knowledge-id", KB, "--tenant", TENANT, "--acl-rules", str(rules),
            "--workers", "0", "--json", *more]  # fmt: skip


def environment(alias: str, es_url: str = ES_URL) -> dict[str, str]:
    return {**os.environ, "RSVC_ES_URL": es_url, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}


def run(cli: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def shards(source: Path, rules: Path, alias: str, kill: int, at_bulk: int) -> list[dict[str, Any]]:
    """Every shard at once; shard ``kill`` is killed at its ``at_bulk``-th bulk request, then
    run again alone (as the Job's retry of that index would). The reports of the last runs."""
    procs = {
        i: subprocess.Popen(command(source, rules, "--shard", f"{i}/{SHARDS}"),
                            env=environment(alias), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(SHARDS) if i != kill
    }  # fmt: skip
    cli = command(source, rules, "--shard", f"{kill}/{SHARDS}")
    killed_at_bulk(cli, environment(alias), ES_URL, at_bulk)
    reports = {}
    for i, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err.decode()[-2000:]
        reports[i] = json.loads(out)
    reports[kill] = run(command(source, rules, "--shard", f"{kill}/{SHARDS}"), environment(alias))
    return [reports[i] for i in range(SHARDS)]


def chunks(es: Elasticsearch, alias: str) -> dict[str, tuple[Any, ...]]:
    """Every chunk of the knowledge base: id → what a reader of it would get."""
    es.indices.refresh(index=own(alias))
    out: dict[str, tuple[Any, ...]] = {}
    fields = ["content_hash", "access_roles", "source_etag", "permissions_version",
              "document_name", "segment_count"]  # fmt: skip
    query = {"term": {"knowledge_id": KB}}
    response = es.search(
        index=own(alias),
        query=query,
        source_includes=fields,
        size=10_000,
        sort=["_doc"],
        scroll="2m",
    )
    scroll = response.get("_scroll_id")
    try:
        while hits := response["hits"]["hits"]:
            for hit in hits:
                doc = hit["_source"]
                doc["access_roles"] = sorted(doc.get("access_roles") or ())
                out[hit["_id"]] = tuple(json.dumps(doc.get(f), ensure_ascii=False) for f in fields)
            response = es.scroll(scroll_id=scroll, scroll="2m")
    finally:
        if scroll:
            es.clear_scroll(scroll_id=scroll)
    return out


def test_four_shards_build_one_runs_index_through_kills_and_changes(
    es_sync: Elasticsearch, aliases: tuple[str, str], tmp_path: Path
) -> None:
    one, sharded = aliases
    source, rules = tmp_path / "share", tmp_path / "acl-rules.yaml"
    write_objects(source, OBJECTS)
    rules.write_text(rules_text(40), encoding="utf-8")

    single = run(command(source, rules), environment(one))
    assert single["documents_indexed"] == OBJECTS, single
    reports = shards(source, rules, sharded, kill=1, at_bulk=3)
    assert sum(r["documents_seen"] for r in reports) == OBJECTS  # N records add up
    reference, union = chunks(es_sync, one), chunks(es_sync, sharded)
    assert len(reference) == OBJECTS
    assert union == reference, _difference(reference, union)

    # The share changes: 1% edited, moved, deleted, re-tagged by a sidecar, and 100 added.
    changes = change(source, 0.01, parse_rules(rules.read_text(), str(rules)), random.Random(49))
    for i in range(100):
        folder = source / f"dept-{i % 40:02d}" / "team-0"
        (folder / f"new-{i:03d}.md").write_text(f"# 新增 {i}\n\n新文件 {i}。", encoding="utf-8")
    total = OBJECTS - changes["deleted"] + 100

    single = run(command(source, rules), environment(one))
    assert single["documents_pruned"] == changes["moved"] + changes["deleted"], single
    reports = shards(source, rules, sharded, kill=3, at_bulk=1)
    assert sum(r["documents_seen"] for r in reports) == total
    assert sum(r["documents_pruned"] for r in reports) == single["documents_pruned"]
    assert sum(r["documents_retagged"] for r in reports) == changes["sidecars"]
    reference, union = chunks(es_sync, one), chunks(es_sync, sharded)
    assert len(reference) == total
    assert union == reference, _difference(reference, union)

    # The four runs shown as one (show --json; the console reads the same records).
    show = subprocess.run(
        [sys.executable, "-c", "from indexer.cli import app; app()", "show",
         "--knowledge-id", KB, "--tenant", TENANT, "--json"],
        env=environment(sharded), capture_output=True, text=True, check=True,
    )  # fmt: skip
    last = json.loads(show.stdout)["last_run"]
    assert last["shards"]["count"] == SHARDS and last["shards"]["reported"] == SHARDS
    assert not last["shards"]["missing"]
    assert last["documents_seen"] == total
    assert last["documents_pruned"] == single["documents_pruned"]


def _difference(reference: dict[str, Any], union: dict[str, Any]) -> str:
    lost = sorted(set(reference) - set(union))
    extra = sorted(set(union) - set(reference))
    other = sorted(k for k in set(reference) & set(union) if reference[k] != union[k])
    return f"lost {len(lost)} {lost[:3]}, extra {len(extra)} {extra[:3]}, differ {other[:3]}"
