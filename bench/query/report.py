"""Benchmark outputs: result.json, table.md and latency.png, plus the targets' verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NAMES = {
    "raw": "a. raw Elasticsearch (the service's query, same HTTP client)",
    "service": "b. POST /v1/search (uvicorn, loopback HTTP)",
    "service_cold": "b'. /v1/search, every request a role set never seen",
    "dify": "c. POST /retrieval (Dify route)",
    "service_web": "d. /v1/search + web (provider 80 ms)",
    "workaround": "e. workaround: top-100 without ACL, filtered in Python",
}


#: Issue #17's throughput targets: service QPS at concurrency 16 over raw, by corpus size.
QPS16_TARGETS = {100_000: 0.95, 10_000: 0.8}
#: Issue #17: at 100k chunks, service p50 (concurrency 1) at most this much over raw.
P50_EXTRA_MS = 2.0


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issues #7 and #17 with its measured value and verdict."""
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
    rows = {r["chunks"]: r for r in result.get("scaling", [])}
    rows.setdefault(
        result["chunks"],
        {
            "raw_p50_ms": raw1,
            "service_p50_ms": svc1,
            "raw_qps16": raw16,
            "service_qps16": svc16,
        },
    )
    for chunks, share in QPS16_TARGETS.items():
        if chunks in rows:
            r = rows[chunks]
            limit = share * r["raw_qps16"]
            add(
                f"service QPS at concurrency 16 ≥ {share} × raw ({chunks:,} chunks)",
                r["service_qps16"],
                limit,
                r["service_qps16"] >= limit,
                "qps",
            )
    if 100_000 in rows:
        r = rows[100_000]
        limit = r["raw_p50_ms"] + P50_EXTRA_MS
        add(
            f"service p50 ≤ raw p50 + {P50_EXTRA_MS:g} ms, concurrency 1 (100,000 chunks)",
            r["service_p50_ms"],
            limit,
            r["service_p50_ms"] <= limit,
            "ms",
        )
    if "service_cold" in s:  # issue #38: the field catalog costs no search of its own
        cold1, cold16 = s["service_cold"]["1"]["p50_ms"], s["service_cold"]["16"]["qps"]
        add(
            f"cold role sets: p50 ≤ raw p50 + {P50_EXTRA_MS:g} ms, concurrency 1",
            cold1,
            raw1 + P50_EXTRA_MS,
            cold1 <= raw1 + P50_EXTRA_MS,
            "ms",
        )
        add("cold role sets: QPS@16 ≥ 0.9 × raw", cold16, 0.9 * raw16, cold16 >= 0.9 * raw16, "qps")
        es_raw = s["raw"]["16"]["cpu_ms_per_request"]["elasticsearch"]
        es_cold = s["service_cold"]["16"]["cpu_ms_per_request"]["elasticsearch"]
        add(
            "cold role sets: Elasticsearch CPU per request ≤ 1.05 × raw's",
            es_cold,
            1.05 * es_raw,
            es_cold <= 1.05 * es_raw,
            "ms",
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
    lines += cpu_table(result["scenarios"])
    lines += [
        "",
        f"Workaround recall@10 against /v1/search: {result['workaround_recall_at_10']}",
        "Queries where raw and /v1/search returned the same ids in the same order: "
        f"{result.get('raw_same_as_service', 'not measured')}",
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
    if result.get("separate_cores"):
        lines += [
            "",
            "Elasticsearch on a core of its own (CPU 0; the service and the load generator on "
            "CPU 1), concurrency 16:",
            "",
            "| chunks | raw QPS | service QPS | Dify route QPS | service/raw | Dify/raw |",
            "|---|---|---|---|---|---|",
        ]
        for row in result["separate_cores"]:
            raw, svc, dify = (row[k]["qps"] for k in ("raw", "service", "dify"))
            lines.append(
                f"| {row['chunks']:,} | {raw} | {svc} | {dify} | {svc / raw:.2f} | "
                f"{dify / raw:.2f} |"
            )
    lines += hop_table(result.get("hop") or [])
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


def hop_table(rows: list[dict[str, Any]]) -> list[str]:
    """``--hop``: raw, an HTTP hop that only forwards, and the service, on the shared cores."""
    if not rows:
        return []
    lines = [
        "",
        "The floor: `bench/query/hop.py`, an HTTP hop that only forwards the raw query "
        "(uvicorn and the service's Elasticsearch client; no auth, ACL, chunks, log or metrics), "
        "concurrency 16, the cores shared as above:",
        "",
        "| chunks | raw QPS | hop QPS | service QPS | hop/raw | service/raw | "
        "hop CPU ms/req | service CPU ms/req |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        raw, hop, svc = (row[k] for k in ("raw", "hop", "service"))
        lines.append(
            f"| {row['chunks']:,} | {raw['qps']} | {hop['qps']} | {svc['qps']} | "
            f"{hop['qps'] / raw['qps']:.2f} | {svc['qps'] / raw['qps']:.2f} | "
            f"{hop['cpu_ms_per_request']['service']} | {svc['cpu_ms_per_request']['service']} |"
        )
    return lines


def cpu_table(scenarios: dict[str, Any]) -> list[str]:
    """CPU milliseconds per request at concurrency 16, by part, and the throughput ratio those
    costs allow when Elasticsearch, the service and the load generator share the cores."""
    rows = {k: v["16"].get("cpu_ms_per_request") for k, v in scenarios.items() if "16" in v}
    rows = {k: v for k, v in rows.items() if v}
    if not rows:
        return []
    lines = [
        "",
        "CPU per request at concurrency 16 (ms; Elasticsearch from `_nodes/stats`, the service "
        "process from `/proc`, the load generator from itself):",
        "",
        "| scenario | Elasticsearch | service | load generator | total |",
        "|---|---|---|---|---|",
    ]
    for key, cpu in rows.items():
        total = sum(cpu.values())
        lines.append(
            f"| {NAMES.get(key, key)} | {cpu['elasticsearch']} | {cpu['service']} | "
            f"{cpu['load_generator']} | {total:.3f} |"
        )
    if "raw" in rows and "service" in rows:
        bound = sum(rows["raw"].values()) / sum(rows["service"].values())
        lines += [
            "",
            f"With every core busy, QPS b/a can be at most about {bound:.2f} "
            "(raw's total over the service's).",
        ]
    return lines


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
