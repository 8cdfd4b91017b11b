"""What staying true to the source costs the indexer (design.md §16), and that it holds at
scale: a source of 100,000 objects under folder rules is indexed, then 1% of it changes the
way a company's share changes — objects moved into other departments' folders, deleted,
given a sidecar that names other roles, edited — and the same run is made again.

    python -m bench.indexing.convergence [--objects 100000] [--changed 0.01] [--out DIR]

Measured in one run against the real Elasticsearch: an unchanged run's seconds, then the run
after the changes. Checked after it: **0 stale** (every document the index holds is in the
source, and every object of the source is in the index) and **0 wider** (every changed
document's chunks hold exactly the roles its source now gives: its folder's rule, or its
sidecar's roles). Target: the run after the changes takes ≤ 1.1× the unchanged run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.harness import finish, machine, parser
from bench.permissions.acl_rules import rules_text, write_objects
from indexer.documents import document_id
from indexer.permissions import AclRules, parse_rules
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.tenancy import DEFAULT_TENANT, tenant_alias
from retrieval_svc.words import say

ALIAS = "rsvc-bench-convergence"
KB = "share"
TARGET_RATIO = 1.1
SIDECAR_ROLE = "sidecar-named"


async def run_once(es: AsyncElasticsearch, source: Path, rules: AclRules) -> dict[str, Any]:
    options = IndexOptions(
        knowledge_id=KB,
        alias=tenant_alias(ALIAS, DEFAULT_TENANT),
        acl_rules=rules,
        concurrency=4,
        prune=True,
    )
    started = time.perf_counter()
    report = await index_source(es, LocalSource(source), options)
    seconds = time.perf_counter() - started
    assert report.ok, report.failures[:3]
    return {
        "s": round(seconds, 2),
        "seen": report.documents_seen,
        "indexed": report.documents_indexed,
        "retagged": report.documents_retagged,
        "skipped": report.documents_skipped,
        "pruned": report.documents_pruned,
    }


def change(root: Path, share: float, rules: AclRules, rng: random.Random) -> dict[str, Any]:
    """Change ``share`` of the objects: 40% moved to another department, 20% deleted, 20%
    given a sidecar naming other roles, 20% edited. What each document should hold now."""
    keys = sorted(ref.key for ref in LocalSource(root).list())
    picked = rng.sample(keys, max(5, int(len(keys) * share)))
    n = len(picked)
    moved, deleted = picked[: n * 2 // 5], picked[n * 2 // 5 : n * 3 // 5]
    sidecars, edited = picked[n * 3 // 5 : n * 4 // 5], picked[n * 4 // 5 :]
    expect: dict[str, tuple[str, ...]] = {}  # key → the roles its chunks must hold
    gone: list[str] = []
    for key in moved:
        dept = int(key.split("/")[0].removeprefix("dept-"))
        new = f"dept-{(dept + 17) % 40:02d}/" + key.split("/", 1)[1].replace("doc-", "moved-")
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        (root / key).rename(root / new)
        gone.append(key)
        rule = rules.match(new)
        assert rule is not None
        expect[new] = rule.roles
    for key in deleted:
        (root / key).unlink()
        gone.append(key)
    for key in sidecars:
        rule = rules.match(key)
        assert rule is not None
        (root / f"{key}.meta.json").write_text(json.dumps({"access_roles": [SIDECAR_ROLE]}))
        expect[key] = rule.roles if rule.override else (SIDECAR_ROLE,)
    for key in edited:
        with (root / key).open("a", encoding="utf-8") as f:
            f.write("\n\n修订：补充一段说明。")
        rule = rules.match(key)
        assert rule is not None
        expect[key] = rule.roles
    return {
        "moved": len(moved),
        "deleted": len(deleted),
        "sidecars": len(sidecars),
        "edited": len(edited),
        "expect": expect,
        "gone": gone,
    }


async def stored_roles(es: AsyncElasticsearch) -> dict[str, set[tuple[str, ...]]]:
    """Every stored document → the role sets its chunks hold (scrolled through)."""
    alias = tenant_alias(ALIAS, DEFAULT_TENANT)
    await es.indices.refresh(index=alias)
    out: dict[str, set[tuple[str, ...]]] = {}
    resp = await es.search(
        index=alias,
        query={"term": {"knowledge_id": KB}},
        source_includes=["document_id", "access_roles"],
        size=10_000,
        sort=["_doc"],
        scroll="2m",
    )
    scroll = resp.get("_scroll_id")
    try:
        while hits := resp["hits"]["hits"]:
            for hit in hits:
                doc = hit["_source"]
                roles = tuple(sorted(doc.get("access_roles") or ()))
                out.setdefault(doc["document_id"], set()).add(roles)
            resp = await es.scroll(scroll_id=scroll, scroll="2m")
    finally:
        if scroll:
            await es.clear_scroll(scroll_id=scroll)
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-convergence-"))
    root = work / "share"
    es = AsyncElasticsearch(args.es_url, request_timeout=120)
    rng = random.Random(46)
    try:
        write_objects(root, args.objects)
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await ensure_index(es, ALIAS, tenant=DEFAULT_TENANT)
        rules = parse_rules(rules_text(args.rules), "acl-rules.yaml")
        first = await run_once(es, root, rules)
        print(say("bench_first_load", result=first), file=sys.stderr)
        unchanged = await run_once(es, root, rules)
        print(say("bench_unchanged", result=unchanged), file=sys.stderr)
        changes = change(root, args.changed, rules, rng)
        after = await run_once(es, root, rules)
        print(say("bench_changed", result=after), file=sys.stderr)
        source = {ref.key for ref in LocalSource(root).list()}
        ids = {document_id(KB, f"local:{k}", DEFAULT_TENANT): k for k in source}
        stored = await stored_roles(es)
        stale = sorted(set(stored) - set(ids))
        missing = sorted(set(ids) - set(stored))
        wider = [
            key
            for key, roles in changes["expect"].items()
            if stored.get(document_id(KB, f"local:{key}", DEFAULT_TENANT)) != {tuple(sorted(roles))}
        ]
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*,{ALIAS}-*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()
        shutil.rmtree(work, ignore_errors=True)
    ratio = after["s"] / unchanged["s"]
    return {
        "machine": machine(),
        "objects": args.objects,
        "changed": {k: v for k, v in changes.items() if k not in ("expect", "gone")},
        "first_load": first,
        "unchanged_run": unchanged,
        "run_after_changes": after,
        "ratio": round(ratio, 3),
        "stale": len(stale),
        "missing": len(missing),
        "wider": len(wider),
        "examples": {"stale": stale[:3], "missing": missing[:3], "wider": wider[:3]},
        "target": f"after 1% changed <= {TARGET_RATIO}x an unchanged run; 0 stale, 0 wider",
        "met": ratio <= TARGET_RATIO and not stale and not missing and not wider,
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--changed", type=float, default=0.01)
    p.add_argument("--rules", type=int, default=40)
    args = p.parse_args(argv)
    result = asyncio.run(main(args))
    return finish(result, args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
