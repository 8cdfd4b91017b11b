"""Benchmark outputs: result.json, table.md and latency.png, plus the targets' verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NAMES = {
    "raw": "a. raw Elasticsearch (service's query, in-process)",
    "service": "b. POST /v1/search (uvicorn, loopback HTTP)",
    "dify": "c. POST /retrieval (Dify route)",
    "service_web": "d. /v1/search + web (provider 80 ms)",
    "workaround": "e. workaround: top-100 without ACL, filtered in Python",
}


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue #7 with its measured value and verdict."""
    s = result["scenarios"]
    out: list[dict[str, Any]] = []

    def add(name: str, measured: float, limit: float, ok: bool, unit: str = "") -> None:
        out.append(
            {
                "target": name,
                "measured": round(measured, 2),
                "limit": round(limit, 2),
                "unit": unit,
                "met": bool(ok),
            }
        )

    raw1, svc1 = s["raw"]["1"]["p50_ms"], s["service"]["1"]["p50_ms"]
    limit = max(1.3 * raw1, raw1 + 3)
    add(
        "service p50 ≤ max(1.3 × raw p50, raw p50 + 3 ms), concurrency 1",
        svc1,
        limit,
        svc1 <= limit,
        "ms",
    )
    raw16, svc16 = s["raw"]["16"]["qps"], s["service"]["16"]["qps"]
    add(
        "service QPS at concurrency 16 ≥ 0.7 × raw", svc16, 0.7 * raw16, svc16 >= 0.7 * raw16, "qps"
    )
    web1 = s["service_web"]["1"]["p50_ms"]
    limit = max(80, svc1) + 10
    add("web-merge p50 ≤ max(80 ms, service p50) + 10 ms", web1, limit, web1 <= limit, "ms")
    if "indexer" in result:
        ix = result["indexer"]
        add(
            "indexer ≥ 0.8 × bare bulk (chunks/s)",
            ix["cli_chunks_per_s"],
            0.8 * ix["bare_chunks_per_s"],
            ix["cli_chunks_per_s"] >= 0.8 * ix["bare_chunks_per_s"],
            "chunks/s",
        )
    if "rss" in result:
        add(
            f"indexer peak RSS on {result['rss']['input_mb']} MB ≤ 300 MB",
            result["rss"]["peak_mb"],
            300,
            result["rss"]["peak_mb"] <= 300,
            "MB",
        )
    if "roles" in result:
        r = result["roles"]
        add(
            "service p50 with 1,000 roles ≤ 2 × with 10 roles",
            r["1000"]["p50_ms"],
            2 * r["10"]["p50_ms"],
            r["1000"]["p50_ms"] <= 2 * r["10"]["p50_ms"],
            "ms",
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Corpus {result['chunks']:,} chunks, {result['queries']} queries, "
        f"machine: {result['machine']}",
        "",
        "| scenario | conc. | p50 ms | p95 ms | p99 ms | QPS | ES took p50 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, name in NAMES.items():
        for conc, row in result["scenarios"].get(key, {}).items():
            took = row.get("es_took_p50_ms", "")
            lines.append(
                f"| {name} | {conc} | {row['p50_ms']} | {row['p95_ms']} | "
                f"{row['p99_ms']} | {row['qps']} | {took} |"
            )
    lines += [
        "",
        f"Workaround recall@10 against /v1/search: {result['workaround_recall_at_10']}",
        f"Ratio b/a p50 (concurrency 1): {result['ratios']['service_over_raw_p50']}; "
        f"QPS b/a (concurrency 16): {result['ratios']['service_over_raw_qps16']}",
        "",
    ]
    if "indexer" in result:
        ix = result["indexer"]
        lines.append(
            f"Indexer: CLI {ix['cli_chunks_per_s']} chunks/s vs bare bulk "
            f"{ix['bare_chunks_per_s']} chunks/s ({ix['ratio']}×)"
        )
    if "rss" in result:
        lines.append(
            f"Indexer peak RSS on {result['rss']['input_mb']} MB input: "
            f"{result['rss']['peak_mb']} MB"
        )
    if "roles" in result:
        r = result["roles"]
        lines.append(
            f"Roles in the ACL (concurrency 1, p50): 10 roles {r['10']['p50_ms']} ms, "
            f"1,000 roles {r['1000']['p50_ms']} ms"
        )
    if result.get("scaling"):
        lines += [
            "",
            "| chunks | raw p50 ms | service p50 ms | raw QPS@16 | service QPS@16 |",
            "|---|---|---|---|---|",
        ]
        for row in result["scaling"]:
            lines.append(
                f"| {row['chunks']:,} | {row['raw_p50_ms']} | {row['service_p50_ms']} | "
                f"{row['raw_qps16']} | {row['service_qps16']} |"
            )
    if "three_nodes" in result:
        one, three = result["scenarios"], result["three_nodes"]
        lines += [
            "",
            "Three local nodes (3 shards, 1 replica) beside one node, same corpus and queries "
            "(the three nodes share this machine's CPUs):",
            "",
            "| cluster | raw p50 ms | service p50 ms | raw QPS@16 | service QPS@16 | "
            "service/raw QPS@16 |",
            "|---|---|---|---|---|---|",
        ]
        for name, row in [
            (
                "1 node",
                {
                    "raw_p50_ms": one["raw"]["1"]["p50_ms"],
                    "service_p50_ms": one["service"]["1"]["p50_ms"],
                    "raw_qps16": one["raw"]["16"]["qps"],
                    "service_qps16": one["service"]["16"]["qps"],
                },
            ),
            ("3 nodes", three),
        ]:
            lines.append(
                f"| {name} | {row['raw_p50_ms']} | {row['service_p50_ms']} | {row['raw_qps16']} "
                f"| {row['service_qps16']} | {row['service_qps16'] / row['raw_qps16']:.2f} |"
            )
    lines += ["", "| target | measured | limit | met |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(
            f"| {t['target']} | {t['measured']} {t['unit']} | {t['limit']} {t['unit']} | "
            f"{'yes' if t['met'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=False)
    for ax, conc in zip(axes, ("1", "16"), strict=True):
        keys = [k for k in NAMES if conc in result["scenarios"].get(k, {})]
        x = range(len(keys))
        for offset, pct in ((-0.25, "p50_ms"), (0, "p95_ms"), (0.25, "p99_ms")):
            ax.bar(
                [i + offset for i in x],
                [result["scenarios"][k][conc][pct] for k in keys],
                width=0.25,
                label=pct.replace("_ms", ""),
            )
        ax.set_xticks(list(x), list(keys), rotation=20)
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"concurrency {conc}")
        ax.legend()
    fig.suptitle(f"retrieval-svc vs raw Elasticsearch — {result['chunks']:,} chunks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    result["targets"] = targets(result)
    (out / "result.json").write_text(json.dumps(result, ensure_ascii=False, indent=2), "utf-8")
    (out / "table.md").write_text(markdown(result), "utf-8")
    plot(result, out / "latency.png")
