"""The relevance benchmark's data: CMRC 2018 as documents and questions, and the scores."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.tenancy import tenant_alias

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "cmrc2018" / "cmrc2018_dev.json"


ALIAS = "rsvc-relevance"


OWN = tenant_alias(ALIAS, DEFAULT_TENANT)  # the default tenant's own index: raw searches


KB = "cmrc2018"


KEY = "bench-relevance-key-0123456789"


ROLES = ["r0", "r1", "r2", "r3"]


PUBLIC_SHARE = 0.4  # the rest carries one role each


MODES = ("bm25", "vector", "hybrid")


DEPTH = 30  # chunks asked per question: enough unique documents for @10 and the ACL run


@dataclass(frozen=True, slots=True)
class Question:
    """One question, the paragraph that answers it, and who asks in the permission run."""

    text: str
    doc: str
    role: str


def load_cmrc(path: Path, limit: int | None, max_queries: int | None, seed: int) -> Any:
    """Paragraphs (id → title, text, roles) and questions, deterministic for a seed."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    rng = random.Random(seed)
    paragraphs: dict[str, dict[str, Any]] = {}
    questions: list[Question] = []
    for article in data:
        for para in article["paragraphs"]:
            if limit is not None and len(paragraphs) >= limit:
                break
            roles = [] if rng.random() < PUBLIC_SHARE else [rng.choice(ROLES)]
            paragraphs[para["id"]] = {
                "title": article.get("title", ""),
                "text": para["context"],
                "roles": roles,
            }
            questions += [
                Question(q["question"], para["id"], rng.choice(ROLES)) for q in para["qas"]
            ]
    if max_queries is not None and len(questions) > max_queries:
        questions = random.Random(seed + 1).sample(questions, max_queries)
    return paragraphs, questions


def write_corpus(folder: Path, paragraphs: dict[str, dict[str, Any]], titles: bool) -> None:
    """One Markdown file per paragraph, access_roles (and the article title) in front matter.

    Without ``titles`` a paragraph is its text alone, as the eval set's task defines it; with
    them, the service's title field (half weight in BM25) helps BM25 a lot on this data.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for pid, para in paragraphs.items():
        front = {"title": para["title"] if titles else pid, "access_roles": para["roles"] or None}
        body = f"---\n{json.dumps(front, ensure_ascii=False)}\n---\n\n{para['text']}\n"
        (folder / f"{pid}.md").write_text(body, encoding="utf-8")


def doc_of(chunk: dict[str, Any]) -> str:
    """The CMRC paragraph id of a returned chunk (the file name stem)."""
    return str(chunk.get("document_name", "")).rsplit("/", 1)[-1].removesuffix(".md")


def unique_docs(ids: Sequence[str]) -> list[str]:
    """Document ids in first-seen order (several chunks of a paragraph count once)."""
    return list(dict.fromkeys(ids))


def scores(
    rankings: Sequence[Sequence[str]], relevant: Sequence[str], k: int = 10
) -> dict[str, float]:
    """nDCG@k, recall@k and MRR@k with one relevant document per question."""
    ndcg = recall = mrr = 0.0
    for ranking, want in zip(rankings, relevant, strict=True):
        top = list(ranking[:k])
        if want in top:
            rank = top.index(want) + 1
            ndcg += 1 / math.log2(rank + 1)
            recall += 1
            mrr += 1 / rank
    n = max(1, len(relevant))
    return {
        "ndcg@10": round(ndcg / n, 4),
        "recall@10": round(recall / n, 4),
        "mrr@10": round(mrr / n, 4),
    }


def p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0
