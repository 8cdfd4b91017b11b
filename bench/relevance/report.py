"""The relevance benchmark's targets, Markdown table and plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with its measured value and whether it holds."""
    m = result["modes"]
    lat = {k: m[k]["latency"]["p50_ms"] for k in m}
    perm = result["permission_aware"]["hybrid"]
    budget = round(result["query_embedding_p50_ms"] + max(lat["bm25"], lat["vector"]) + 5, 2)
    rows = [
        ("hybrid nDCG@10 ≥ 0.98", m["hybrid"]["ndcg@10"], m["hybrid"]["ndcg@10"] >= 0.98),
        (
            "hybrid nDCG@10 ≥ bm25 + 0.02",
            round(m["hybrid"]["ndcg@10"] - m["bm25"]["ndcg@10"], 4),
            m["hybrid"]["ndcg@10"] >= m["bm25"]["ndcg@10"] + 0.02,
        ),
        (
            "ACL pre-filter recall@10 = unrestricted recall on the visible set",
            f"{perm['prefilter']['recall@10']} vs {perm['ideal']['recall@10']}",
            perm["prefilter"]["recall@10"] >= perm["ideal"]["recall@10"] and perm["leaked"] == 0,
        ),
        (
            "hybrid p50 ≤ embed p50 + max(bm25, vector) p50 + 5 ms",
            f"{lat['hybrid']} ≤ {budget}",
            lat["hybrid"] <= budget,
        ),
        (
            "repeated query p50 ≤ bm25 p50 + 5 ms",
            f"{lat['hybrid_cached']} ≤ {round(lat['bm25'] + 5, 2)}",
            lat["hybrid_cached"] <= lat["bm25"] + 5,
        ),
        (
            "after a merge: hybrid nDCG@10 ≥ bm25, vector within 0.01 of before",
            f"{result['after_merge']['hybrid']['ndcg@10']} vs "
            f"{result['after_merge']['bm25']['ndcg@10']}; vector "
            f"{result['after_merge']['vector']['ndcg@10']} (was {m['vector']['ndcg@10']})",
            result["after_merge"]["hybrid"]["ndcg@10"] >= result["after_merge"]["bm25"]["ndcg@10"]
            and result["after_merge"]["vector"]["ndcg@10"] >= m["vector"]["ndcg@10"] - 0.01,
        ),
        (
            "service RSS with model ≤ 400 MB",
            result["rss_mb"]["VmHWM"],
            result["rss_mb"]["VmHWM"] <= 400,
        ),
        (
            "indexer ≥ 0.9 × embedder throughput",
            result["indexer"]["ratio_to_embedder"],
            result["indexer"]["ratio_to_embedder"] >= 0.9,
        ),
    ]
    return [{"target": t, "measured": v, "met": bool(ok)} for t, v, ok in rows]


def markdown(result: dict[str, Any]) -> str:
    """The tables for the README and the note."""
    lines = [
        f"CMRC 2018 dev: {result['paragraphs']} paragraphs "
        f"({'with' if result['titles'] else 'without'} article titles), "
        f"{result['questions']} questions; model {result['model']['model']} "
        f"({result['model']['dims']} d); {result['machine']}. Elasticsearch took p50 (ms): "
        + ", ".join(f"{k} {v}" for k, v in result.get("elasticsearch_took_p50_ms", {}).items())
        + ".",
        "",
        "| mode | nDCG@10 | recall@10 | MRR@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["modes"].items():
        lines.append(
            f"| {name} | {row['ndcg@10']} | {row['recall@10']} | {row['mrr@10']} | "
            f"{row['latency']['p50_ms']} | {row['latency']['p95_ms']} |"
        )
    perm = result["permission_aware"]
    lines += [
        "",
        f"Permission-aware ({perm['questions']} questions whose paragraph the asker may see):",
        "",
        "| mode | pre-filter recall@10 | ideal recall@10 | post-filter recall@10 "
        "| results/query pre vs post | leaked |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("vector", "hybrid"):
        p = perm[mode]
        lines.append(
            f"| {mode} | {p['prefilter']['recall@10']} | {p['ideal']['recall@10']} | "
            f"{p['postfilter']['recall@10']} | {p['prefilter_results_per_query']} vs "
            f"{p['postfilter_results_per_query']} | {p['leaked']} |"
        )
    tuning = result["tuning"]
    shown = tuning[:6] + [r for r in tuning[6:] if r["fusion"] == "none (bm25)"]
    lines += ["", "Tuning (offline on the same data, nDCG@10): best six, and each BM25 view", ""]
    lines += [
        "| fusion | BM25 text | vector weight | cosine floor | nDCG@10 |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['fusion']} | {r['bm25_fields']} | {r['vector_weight']} | {r['floor']} "
        f"| {r['ndcg@10']} |"
        for r in shown
    ]
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    lines += [
        f"| {t['target']} | {t['measured']} | {'✓' if t['met'] else '✗'} |"
        for t in result["targets"]
    ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    """nDCG@10 and p50 latency per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["modes"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.bar(names, [result["modes"][n]["ndcg@10"] for n in names], color="#4a7")
    a.set_ylim(0.8, 1.0)
    a.set_title("nDCG@10 (CMRC 2018 dev)")
    b.bar(names, [result["modes"][n]["latency"]["p50_ms"] for n in names], color="#47a")
    b.set_title("p50 latency, ms (concurrency 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
