"""What folder rules cost the indexer (issue #35 §5): 100,000 objects indexed with and without
``--acl-rules``, in one run, into the real Elasticsearch; then a changed rule, and what its
re-tag costs.

    python -m bench.permissions.acl_rules [--objects 100000] [--rules 40] [--out DIR]

The objects are small Markdown files in 400 folders (``dept-NN/team-M/…``); the rules file has
``--rules`` globs (folders, file types, ``**`` patterns, overrides), the first match wins, and a
catch-all ``unmatched: refuse``. Measured: each run's seconds (the same files, two knowledge
bases, first loads), the rules' own matching time over every key, and the share of the run it
is. Target: the rules cost ≤ 5% of the run. Then one rule's roles change and the knowledge base
is indexed again: how many documents are re-tagged (not re-embedded), and how long it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.harness import finish, machine, parser
from indexer.permissions import AclRules, parse_rules
from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from retrieval_svc.search.index import ensure_index, template_name
from retrieval_svc.tenancy import DEFAULT_TENANT, tenant_alias
from retrieval_svc.words import say

ALIAS = "rsvc-bench-acl-rules"
TARGET_SHARE = 0.05
FOLDERS = [(d, t) for d in range(40) for t in range(10)]


def write_objects(root: Path, count: int) -> None:
    for i in range(count):
        dept, team = FOLDERS[i % len(FOLDERS)]
        folder = root / f"dept-{dept:02d}" / f"team-{team}"
        if i < len(FOLDERS):
            folder.mkdir(parents=True, exist_ok=True)
        suffix = ".md" if i % 7 else ".txt"
        (folder / f"doc-{i:06d}{suffix}").write_text(
            f"# 文档 {i}\n\n部门 {dept} 小组 {team} 的第 {i} 份制度说明。", encoding="utf-8"
        )


def rules_text(count: int, extra_role: str = "") -> str:
    """``count`` rules of the shapes a company writes, most specific first."""
    rules = []
    for n in range(count - 2):
        dept, team = n % 40, n % 10
        where = f"dept-{dept:02d}/team-{team}"
        if n % 4 == 0:
            rule = f"{{match: '{where}/*.txt', access_roles: [d{dept}-t{team}-notes]}}"
        elif n % 4 == 1:
            rule = f"{{match: '{where}/**', access_roles: [d{dept}-t{team}]}}"
        elif n % 4 == 2:
            early = f"**/team-{team}/doc-0{team}*.md"
            rule = f"{{match: '{early}', access_roles: [t{team}-early], override: true}}"
        else:
            rule = f"{{match: 'dept-{dept:02d}/**', access_roles: [dept-{dept}{extra_role}]}}"
        rules.append(f"  - {rule}")
    rules.append("  - {match: '{dept-3*,dept-2*}/**', access_roles: [upper-depts]}")
    rules.append("  - {match: 'dept-*/**', access_roles: [staff]}")
    return "unmatched: refuse\nrules:\n" + "\n".join(rules) + "\n"


async def run_once(
    es: AsyncElasticsearch, source: Path, kb: str, rules: AclRules | None
) -> dict[str, Any]:
    options = IndexOptions(
        knowledge_id=kb, alias=tenant_alias(ALIAS, DEFAULT_TENANT), acl_rules=rules, concurrency=4
    )
    started = time.perf_counter()
    report = await index_source(es, LocalSource(source), options)
    seconds = time.perf_counter() - started
    assert report.ok, report.failures[:3]
    return {
        "s": round(seconds, 1),
        "documents_seen": report.documents_seen,
        "documents_indexed": report.documents_indexed,
        "documents_retagged": report.documents_retagged,
        "documents_skipped": report.documents_skipped,
        "chunks_embedded": report.chunks_embedded,
    }


def matching_cost(rules: AclRules, keys: list[str]) -> float:
    """Seconds to match every key against the rules (what a run spends in them)."""
    started = time.perf_counter()
    for key in keys:
        rules.match(key)
    return time.perf_counter() - started


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rsvc-acl-rules-"))
    es = AsyncElasticsearch(args.es_url, request_timeout=120)
    try:
        started = time.perf_counter()
        write_objects(work / "docs", args.objects)
        seconds = f"{time.perf_counter() - started:.0f}"
        print(say("bench_objects_written", n=args.objects, seconds=seconds), file=sys.stderr)
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*")
        await ensure_index(es, ALIAS, tenant=DEFAULT_TENANT)
        rules = parse_rules(rules_text(args.rules), "acl-rules.yaml")
        plain = await run_once(es, work / "docs", "without-rules", None)
        print(say("bench_without_rules", result=plain), file=sys.stderr)
        ruled = await run_once(es, work / "docs", "with-rules", rules)
        print(say("bench_with_rules", result=ruled), file=sys.stderr)
        keys = [ref.key for ref in LocalSource(work / "docs").list()]
        match_s = matching_cost(parse_rules(rules_text(args.rules)), keys)
        changed = parse_rules(rules_text(args.rules, extra_role="-v2"), "acl-rules.yaml")
        retag = await run_once(es, work / "docs", "with-rules", changed)
        print(say("bench_changed_rule", result=retag), file=sys.stderr)
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}.*,{ALIAS}-*")
        await es.options(ignore_status=404).indices.delete_index_template(name=template_name(ALIAS))
        await es.close()
        shutil.rmtree(work, ignore_errors=True)
    share = match_s / ruled["s"]
    return {
        "machine": machine(),
        "objects": args.objects,
        "rules": len(rules.rules),
        "without_rules": plain,
        "with_rules": ruled,
        "run_ratio": round(ruled["s"] / plain["s"], 3),
        "matching_s": round(match_s, 2),
        "matching_us_per_object": round(match_s / len(keys) * 1e6, 1),
        "matching_share_of_run": round(share, 4),
        "rule_changed": retag,
        "target": f"the rules' matching <= {TARGET_SHARE:.0%} of the run",
        "met": share <= TARGET_SHARE,
    }


def cli(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--rules", type=int, default=40)
    args = p.parse_args(argv)
    result = asyncio.run(main(args))
    return finish(result, args.out)


if __name__ == "__main__":
    raise SystemExit(cli())
