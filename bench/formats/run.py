"""Format benchmark (issue #34 §5): the same CMRC 2018 passages written as every format the
indexer reads, indexed through the CLI, and measured against the same passages as Markdown.

    python -m bench.formats [--data PATH] [--passages 60] [--per-doc 6] [--offset 0]
                            [--formats pdf,xlsx,...] [--out DIR]
    python -m bench.formats --ocr-speed 300 [--out DIR]   # OCR: the indexer vs the engine

Per format: documents seen / indexed / failed / passed over, text fidelity (the share of the
source's characters, whitespace aside and full-width forms folded (NFKC), that the stored
chunks hold in order: the matching blocks of ``difflib`` over each document), BM25 nDCG@10 of
every question of those passages (the service's own full-text query,
``retrieval_svc.search.query.text_query``, on the format's knowledge base; a hit is the
question's passage, found by which passage a returned chunk's text overlaps most), seconds,
pages per second and the peak resident memory of the indexer with its workers (``/proc``).
``--offset`` takes other passages (the held-out check). Targets: every document indexed,
fidelity ≥ 0.98 born-digital, ≥ 0.95 scanned (rotated, skewed, 150 and 300 dpi) and ≥ 0.90
stamped or photographed, nDCG ≥ 0.97 × Markdown for every format.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import math
import os
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from bench.formats import renderers
from bench.harness import parser as harness_parser
from bench.harness.tree import run_measured
from bench.relevance.data import DEFAULT_DATA
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.search.query import text_query
from retrieval_svc.tenancy import tenant_alias
from retrieval_svc.words import say

ALIAS = "bench-formats"
OWN = tenant_alias(ALIAS, DEFAULT_TENANT)  # the default tenant's index, where the runs go
SCANNED = {"pdf-scanned", *renderers.IMAGES}
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]
STAMPED = {"scan-seal", "photo"}  # text under a seal, a phone's light and blur (issue #48 §3)
TARGET_FIDELITY = {"born-digital": 0.98, "scanned": 0.95, "stamped or photographed": 0.90}
TARGET_NDCG_RATIO = 0.97


def squeeze(text: str) -> str:
    """The text without whitespace, folded as the search analyzer folds it (NFKC: a
    full-width ``（`` is ``(``, as OCR reads it and ``rsvc_text``'s width folding indexes it)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def load(path: Path, count: int, offset: int) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    """``count`` passages from ``offset`` (title, text) and their questions (text, passage)."""
    passages: list[dict[str, Any]] = []
    questions: list[tuple[str, int]] = []
    seen = 0
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            seen += 1
            if seen <= offset or len(passages) >= count:
                continue
            questions += [(q["question"], len(passages)) for q in paragraph["qas"]]
            passages.append({"title": article["title"], "text": paragraph["context"]})
    return passages, questions


def write_folder(
    folder: Path, name: str, passages: Sequence[dict[str, Any]], per_doc: int
) -> dict[str, list[int]]:
    """The passages as files of one format; which passages each file holds."""
    suffix, renderer = renderers.RENDERERS[name]
    size = 1 if name in renderers.IMAGES else per_doc  # an image is one page: one passage
    folder.mkdir(parents=True, exist_ok=True)
    holds: dict[str, list[int]] = {}
    for start in range(0, len(passages), size):
        ids = list(range(start, min(start + size, len(passages))))
        file = f"doc-{start:04d}{suffix}"
        sections = [(passages[i]["title"], passages[i]["text"]) for i in ids]
        (folder / file).write_bytes(renderer(sections))
        holds[file] = ids
    return holds


def bigrams(text: str) -> set[str]:
    text = squeeze(text)
    return {text[i : i + 2] for i in range(len(text) - 1)}


def passage_of(chunk: dict[str, Any], holds: dict[str, list[int]], grams: list[set[str]]) -> int:
    """The passage a chunk was cut from: of its file's passages, the one it shares most
    character bigrams with (-1 for a chunk of no passage)."""
    mine = bigrams(chunk["content"])
    best, best_overlap = -1, 0
    for pid in holds.get(chunk["document_name"], []):
        overlap = len(mine & grams[pid])
        if overlap > best_overlap:
            best, best_overlap = pid, overlap
    return best


def fidelity(source: str, stored: str) -> float:
    a, b = squeeze(source), squeeze(stored)
    if not a:
        return 1.0
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return sum(block.size for block in blocks) / len(a)


async def measure_format(
    es: AsyncElasticsearch,
    name: str,
    root: Path,
    passages: list[dict[str, Any]],
    questions: list[tuple[str, int]],
    per_doc: int,
    es_url: str,
) -> dict[str, Any]:
    folder = root / name
    holds = write_folder(folder, name, passages, per_doc)
    kb = f"fmt-{name}"
    env = {**os.environ, "RSVC_ES_URL": es_url, "RSVC_INDEX_ALIAS": ALIAS, "RSVC_EMBEDDER": "none"}
    argv = [*CLI, "index", str(folder), "--knowledge-id", kb, "--json", "--force", "--prune"]
    started = time.perf_counter()
    run = run_measured(argv, env=env, timeout_s=3600)
    seconds = time.perf_counter() - started
    if not run.stdout.strip():
        raise RuntimeError(f"indexer printed no report for {name}: {run.stderr[-2000:]}")
    report = json.loads(run.stdout)
    await es.indices.refresh(index=OWN)
    found = await es.search(
        index=OWN,
        query={"term": {"knowledge_id": kb}},
        size=10_000,
        sort=[{"document_name": "asc"}, {"segment_position": "asc"}],
        source_includes=["document_name", "content", "metadata"],
    )
    chunks = [hit["_source"] for hit in found["hits"]["hits"]]
    by_doc: dict[str, list[str]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk["document_name"], []).append(chunk["content"])
    fidelities = [
        fidelity(
            "".join(passages[i]["title"] + passages[i]["text"] for i in ids),
            "".join(by_doc.get(file, [])),
        )
        for file, ids in holds.items()
    ]
    grams = [bigrams(p["text"]) for p in passages]
    ndcg = 0.0
    for question, want in questions:
        hits = await es.search(
            index=OWN,
            query={
                "bool": {"must": [text_query(question)], "filter": [{"term": {"knowledge_id": kb}}]}
            },
            size=30,
            source_includes=["document_name", "content"],
        )
        ranking = list(
            dict.fromkeys(passage_of(h["_source"], holds, grams) for h in hits["hits"]["hits"])
        )[:10]
        if want in ranking:
            ndcg += 1 / math.log2(ranking.index(want) + 2)
    pages = sum(
        int(c.get("metadata", {}).get("pages", 0))
        for c in {c["document_name"]: c for c in chunks}.values()
    )
    ocr_pages = sum(
        int(c.get("metadata", {}).get("ocr_pages", 0))
        for c in {c["document_name"]: c for c in chunks}.values()
    )
    confidences = [
        float(c["metadata"]["ocr_confidence"]) for c in chunks if "ocr_confidence" in c["metadata"]
    ]
    return {
        "format": name,
        "kind": (
            "stamped or photographed"
            if name in STAMPED
            else "scanned"
            if name in SCANNED
            else "born-digital"
        ),
        "documents": len(holds),
        "seen": report["documents_seen"],
        "indexed": report["documents_indexed"],
        "failed": report["documents_failed"],
        "passed_over": sum(report.get("passed_over", {}).values()),
        "failures": report["failures"][:3],
        "chunks": len(chunks),
        "fidelity_mean": round(sum(fidelities) / len(fidelities), 4),
        "fidelity_min": round(min(fidelities), 4),
        "ndcg@10": round(ndcg / max(1, len(questions)), 4),
        "seconds": round(seconds, 1),
        "pages": pages,
        "ocr_pages": ocr_pages,
        "ocr_confidence": round(sum(confidences) / len(confidences), 4) if confidences else None,
        "pages_per_s": round(pages / seconds, 2) if pages else None,
        "peak_rss_mb": round(run.peak_bytes / 2**20),
    }


def judge(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's ratio to Markdown and whether it meets its targets."""
    base = next((r["ndcg@10"] for r in rows if r["format"] == "markdown"), None)
    for row in rows:
        row["ndcg_ratio"] = round(row["ndcg@10"] / base, 4) if base else None
        row["meets"] = bool(
            row["indexed"] == row["documents"]
            and row["fidelity_min"] >= TARGET_FIDELITY[row["kind"]]
            and (row["ndcg_ratio"] is None or row["ndcg_ratio"] >= TARGET_NDCG_RATIO)
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| format | seen / indexed / failed / passed over | fidelity mean (min) | nDCG@10 "
        "| × Markdown | s | pages/s | peak RSS MB | meets |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['format']} | {r['seen']} / {r['indexed']} / {r['failed']} / "
            f"{r['passed_over']} | {r['fidelity_mean']:.3f} ({r['fidelity_min']:.3f}) | "
            f"{r['ndcg@10']:.3f} | {r['ndcg_ratio'] or 0:.3f} | {r['seconds']} | "
            f"{r['pages_per_s'] or '—'} | {r['peak_rss_mb']} | {'yes' if r['meets'] else 'NO'} |"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    passages, questions = load(args.data, args.passages, args.offset)
    if args.queries and len(questions) > args.queries:
        questions = questions[: args.queries]
    es = AsyncElasticsearch(args.es_url, request_timeout=120)
    rows = []
    try:
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.formats:
                row = await measure_format(
                    es, name, Path(tmp), passages, questions, args.per_doc, args.es_url
                )
                print(json.dumps(row, ensure_ascii=False), flush=True)
                rows.append(row)
        await es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
    finally:
        await es.close()
    judge(rows)
    return {
        "passages": len(passages),
        "questions": len(questions),
        "offset": args.offset,
        "per_doc": args.per_doc,
        "rows": rows,
        "all_meet": all(r["meets"] for r in rows),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = harness_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=60)
    parser.add_argument("--per-doc", type=int, default=6)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--queries", type=int, default=0, help="at most this many (0: all)")
    parser.add_argument(
        "--formats",
        type=lambda s: [f for f in s.split(",") if f],
        default=list(renderers.RENDERERS),
        help=f"of {','.join(renderers.RENDERERS)}",
    )
    parser.add_argument(
        "--ocr-speed",
        type=int,
        default=0,
        metavar="N",
        help="instead: N one-page scans and N photos, the indexer against the engine alone",
    )
    args = parser.parse_args(argv)
    unknown = set(args.formats) - set(renderers.RENDERERS)
    if unknown:
        parser.error(
            say("bench_unknown_formats", unknown=sorted(unknown), known=sorted(renderers.RENDERERS))
        )
    if "markdown" not in args.formats:
        args.formats.insert(0, "markdown")  # the baseline every ratio is against
    return args


def cli(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.ocr_speed:
        from bench.formats import ocr_speed

        passages, _ = load(args.data, max(args.passages, 1), args.offset)
        speed = ocr_speed.measure(passages, args.ocr_speed, args.es_url, ALIAS)
        print(json.dumps(speed, ensure_ascii=False, indent=1))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "ocr-speed.json").write_text(
                json.dumps(speed, ensure_ascii=False, indent=1)
            )
        return 0 if speed["met"] else 1
    result = asyncio.run(main(args))
    markdown = table(result["rows"])
    print(markdown)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(json.dumps(result, ensure_ascii=False, indent=1))
        (args.out / "table.md").write_text(markdown + "\n")
    return 0 if result["all_meet"] else 1


if __name__ == "__main__":
    sys.exit(cli())
