"""The freshness benchmark's run: a source written, indexed and watched, changes made at a
steady rate, each change's window measured by a prober (see the package's docstring)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from bench.common import machine, print_result
from retrieval_svc.acl.rule import acl_query

ALIAS = "rsvc-bench-freshness"
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]
RULES = """unmatched: refuse
rules:
{extra}  - match: 公共/**
    access_roles: []
  - match: 法务/**
    access_roles: [法务]
  - match: 人事/**
    access_roles: [人事]
"""
NARROWING = ("move", "delete", "sidecar", "rules")
WIDENING = ("edit", "new")
PROBE_S = 0.1
GIVE_UP_S = 600.0


def text(i: int, word: str = "") -> str:
    return f"# 文档 {i}\n\n第{i}号记录：配电房巡检、电梯维保与消防演练的安排。{word}\n"


@dataclass(slots=True)
class Change:
    """One change at the source and what must hold once it is in force."""

    kind: str
    at: float  # time.time() when the source changed
    holds: Callable[[Elasticsearch], bool]
    done_at: float | None = None

    @property
    def window(self) -> float | None:
        return None if self.done_at is None else self.done_at - self.at


def count(es: Elasticsearch, index: str, kb: str, roles: list[str], *clauses: Any) -> int:
    """Chunks of ``kb`` the holder of ``roles`` sees that match ``clauses`` (the service's
    own ACL clause)."""
    query = {"bool": {"filter": [{"term": {"knowledge_id": kb}}, acl_query(roles), *clauses]}}
    return int(es.count(index=index, query=query)["count"])


class Source:
    """A folder or a bucket of the benchmark, written and changed as a company would."""

    def __init__(self, kind: str, root: Path, s3: Any = None, bucket: str = "") -> None:
        self.kind, self.root, self.s3, self.bucket = kind, root, s3, bucket

    @property
    def spec(self) -> str:
        return str(self.root / "share") if self.kind == "folder" else f"s3://{self.bucket}/share"

    def put(self, key: str, body: str) -> None:
        if self.kind == "folder":
            path = self.root / "share" / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        else:
            self.s3.put_object(Bucket=self.bucket, Key=f"share/{key}", Body=body.encode())

    def delete(self, key: str) -> None:
        if self.kind == "folder":
            (self.root / "share" / key).unlink()
        else:
            self.s3.delete_object(Bucket=self.bucket, Key=f"share/{key}")

    def move(self, key: str, to: str) -> None:
        if self.kind == "folder":
            target = self.root / "share" / to
            target.parent.mkdir(parents=True, exist_ok=True)
            (self.root / "share" / key).rename(target)
        else:
            self.s3.copy_object(
                Bucket=self.bucket,
                Key=f"share/{to}",
                CopySource={"Bucket": self.bucket, "Key": f"share/{key}"},
            )
            self.s3.delete_object(Bucket=self.bucket, Key=f"share/{key}")


def key_of(i: int) -> str:
    return f"公共/d{i // 1000:03d}/doc{i:06d}.md"


def write_source(source: Source, objects: int) -> None:
    if source.kind == "folder":
        for i in range(objects):
            source.put(key_of(i), text(i))
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: source.put(key_of(i), text(i)), range(objects)))


def changes(
    source: Source, index: str, kb: str, objects: int, per_kind: int, seed: int, rules: Path
) -> list[tuple[str, Callable[[], Change]]]:
    """The changes to make, interleaved by kind: each a callable that makes it and says
    what must hold afterwards."""
    rng = random.Random(seed)
    folders = sorted({i // 1000 for i in range(objects)})
    restricted = min(per_kind, len(folders) - 1)  # (the first folders: a rules edit each)
    picked = rng.sample(range(restricted * 1000, objects), per_kind * 4)  # (the others)
    made: dict[str, list[Callable[[], Change]]] = {k: [] for k in (*NARROWING, *WIDENING)}

    def gone(key: str) -> Callable[[Elasticsearch], bool]:
        """Whether the public reader no longer finds ``key``."""
        return lambda es: count(es, index, kb, [], {"term": {"document_name": key}}) == 0

    for n in range(per_kind):
        a, b, c, d = picked[4 * n : 4 * n + 4]

        def move(i: int = a) -> Change:
            source.move(key_of(i), key_of(i).replace("公共/", "法务/", 1))
            return Change("move", time.time(), gone(key_of(i)))

        def delete(i: int = b) -> Change:
            source.delete(key_of(i))
            return Change(
                "delete",
                time.time(),
                gone(key_of(i)),
            )

        def sidecar(i: int = c) -> Change:
            source.put(key_of(i) + ".meta.json", json.dumps({"access_roles": ["董事会"]}))
            return Change(
                "sidecar",
                time.time(),
                gone(key_of(i)),
            )

        def edit(i: int = d, n: int = n) -> Change:
            word = f"新版标记{n:04d}甲"
            source.put(key_of(i), text(i, word))
            match = {"match_phrase": {"content": word}}
            return Change("edit", time.time(), lambda es: count(es, index, kb, [], match) > 0)

        def new(n: int = n) -> Change:
            word = f"新建标记{n:04d}乙"
            source.put(f"公共/new/n{n:04d}.md", text(objects + n, word))
            match = {"match_phrase": {"content": word}}
            return Change("new", time.time(), lambda es: count(es, index, kb, [], match) > 0)

        def restrict(n: int = n) -> Change:
            folder = f"公共/d{folders[n]:03d}/"
            current = rules.read_text(encoding="utf-8")
            extra = current.split("rules:\n", 1)[1].split("  - match: 公共/**", 1)[0]
            extra += f"  - match: {folder}**\n    access_roles: [财务]\n"
            rules.write_text(RULES.format(extra=extra), encoding="utf-8")
            prefix = {"prefix": {"document_name": folder}}
            return Change("rules", time.time(), lambda es: count(es, index, kb, [], prefix) == 0)

        for kind, make in (
            ("move", move),
            ("delete", delete),
            ("sidecar", sidecar),
            ("rules", restrict),
            ("edit", edit),
            ("new", new),
        ):
            if kind == "rules" and n >= restricted:
                continue  # (a folder of 公共 stays public)
            made[kind].append(make)
    order = [
        (k, f) for n in range(per_kind) for k in made if n < len(made[k]) for f in [made[k][n]]
    ]
    return order


class Prober:
    """Asks every ``PROBE_S`` whether each pending change holds; notes when it first does."""

    def __init__(self, es: Elasticsearch) -> None:
        self.es, self.pending, self.done = es, [], []  # type: ignore[var-annotated]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, change: Change) -> None:
        with self._lock:
            self.pending.append(change)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                pending = list(self.pending)
            for change in pending:
                try:
                    holds = change.holds(self.es)
                except Exception:  # (the prober keeps asking)
                    holds = False
                if holds:
                    change.done_at = time.time()
                    with self._lock:
                        self.pending.remove(change)
                        self.done.append(change)
            time.sleep(PROBE_S)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def summary(windows: list[float]) -> dict[str, float]:
    ordered = sorted(windows)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p95": round(p95, 2),
        "max": round(ordered[-1], 2),
    }


@dataclass
class Setup:
    """What a scenario runs against."""

    es: Elasticsearch
    env: dict[str, str]
    work: Path
    args: argparse.Namespace
    s3: Any = None
    sqs: Any = None
    results: dict[str, Any] = field(default_factory=dict)


def scenario(setup: Setup, source_kind: str, mode: str) -> dict[str, Any]:
    """One source kind in one mode: written, indexed, watched, changed, measured."""
    args, es = setup.args, setup.es
    kb = f"fresh-{source_kind}-{mode}"
    root = setup.work / kb
    root.mkdir()
    rules = root / "rules.yaml"
    rules.write_text(RULES.format(extra=""), encoding="utf-8")
    events: list[str] = []
    if source_kind == "folder":
        source = Source("folder", root)
    else:
        bucket = kb.replace("_", "-")
        setup.s3.create_bucket(Bucket=bucket)
        source = Source("s3", root, setup.s3, bucket)
    started = time.perf_counter()
    write_source(source, args.objects)
    written_s = time.perf_counter() - started
    common = [source.spec, "--knowledge-id", kb, "--acl-rules", str(rules), "--workers", "1"]
    started = time.perf_counter()
    subprocess.run(
        [*CLI, "index", *common],
        env=setup.env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    indexed_s = time.perf_counter() - started
    if source_kind == "s3" and mode == "events":  # (notifications from now: a steady state)
        bucket = source.bucket
        url = setup.sqs.create_queue(QueueName=bucket)["QueueUrl"]
        arn = setup.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        setup.s3.put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {
                        "QueueArn": arn["Attributes"]["QueueArn"],
                        "Events": [
                            "s3:ObjectCreated:*",
                            "s3:ObjectRemoved:*",
                            "s3:ObjectTagging:*",
                        ],
                    }
                ]
            },
        )
        events = ["--events", f"sqs://{bucket}"]
    if mode == "relisting":
        events = ["--events", "none"]
    rescan = str(args.rescan if mode == "relisting" else 600)
    log = (root / "watch.log").open("wb")
    watcher = subprocess.Popen(
        [*CLI, "watch", *common, *events, "--rescan", rescan, "--health-port", "-1"],
        env=setup.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    index = f"{ALIAS}.*"
    try:
        time.sleep(2.0)
        deadline = time.monotonic() + GIVE_UP_S
        while "re-listing" not in (root / "watch.log").read_text(errors="replace"):
            if time.monotonic() > deadline or watcher.poll() is not None:
                raise RuntimeError(f"the watcher did not start: {(root / 'watch.log').read_text()}")
            time.sleep(1.0)
        todo = changes(source, index, kb, args.objects, args.changes, args.seed, rules)
        with Prober(es) as prober:
            for _, make in todo:
                prober.add(make())
                time.sleep(1.0 / args.rate)
            deadline = time.monotonic() + GIVE_UP_S
            while prober.pending and time.monotonic() < deadline:
                time.sleep(0.5)
            missed = len(prober.pending)
            done = list(prober.done)
    finally:
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(timeout=120)
        log.close()
    by_kind: dict[str, Any] = {}
    for kind in (*NARROWING, *WIDENING):
        windows = [c.window for c in done if c.kind == kind and c.window is not None]
        if windows:
            by_kind[kind] = summary(windows)
    narrowing = [c.window for c in done if c.kind in NARROWING and c.window is not None]
    widening = [c.window for c in done if c.kind in WIDENING and c.window is not None]
    return {
        "objects": args.objects,
        "written_s": round(written_s, 1),
        "indexed_s": round(indexed_s, 1),
        "changes": len(todo),
        "missed": missed,
        "rescan_s": float(rescan) if mode == "relisting" else None,
        "narrowing": summary(narrowing) if narrowing else None,
        "widening": summary(widening) if widening else None,
        "by_kind": by_kind,
    }


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each scenario against issue #55 §4's targets."""
    out = []
    for name, run in result["scenarios"].items():
        narrow_limit = 5.0 if run["rescan_s"] is None else run["rescan_s"] + 5.0
        checks = [
            ("narrowing p95", (run["narrowing"] or {}).get("p95", 1e9), narrow_limit),
            ("widening p95", (run["widening"] or {}).get("p95", 1e9), 30.0),
            ("missed", run["missed"], 0),
        ]
        for what, measured, limit in checks:
            out.append(
                {
                    "scenario": name,
                    "target": f"{what} ≤ {limit:g}",
                    "measured": measured,
                    "met": measured <= limit,
                }
            )
    return out


def main(args: argparse.Namespace) -> dict[str, Any]:
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    es = Elasticsearch(es_url, request_timeout=60)
    work = Path(tempfile.mkdtemp(prefix="rsvc-fresh-"))
    env = {
        **os.environ,
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": ALIAS,
        "RSVC_EMBEDDER": args.embedder,
    }
    setup = Setup(es, env, work, args)
    server = None
    if "s3" in args.sources:
        import boto3
        from moto.server import ThreadedMotoServer

        from tests.support.fake_provider import free_port

        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        endpoint = f"http://127.0.0.1:{port}"
        env.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
            }
        )
        for name in ("s3", "sqs"):
            client = boto3.client(
                name,
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            )
            setattr(setup, name, client)
    result: dict[str, Any] = {"machine": machine(), "scenarios": {}}
    try:
        es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
        for source_kind in args.sources:
            for mode in args.modes:
                name = f"{source_kind} {mode}"
                print(f"freshness: {name} …", file=sys.stderr)
                result["scenarios"][name] = scenario(setup, source_kind, mode)
    finally:
        es.options(ignore_status=404).indices.delete(index=f"{ALIAS}*")
        es.options(ignore_status=404).indices.delete_index_template(name=f"{ALIAS}-template")
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
        es.close()
    result["targets"] = targets(result)
    result["settings"] = {k: v for k, v in vars(args).items() if k != "out"}
    return result


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.freshness", description=__doc__)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=20, help="Changes of each kind.")
    parser.add_argument("--rate", type=float, default=1.0, help="Changes per second.")
    parser.add_argument("--rescan", type=float, default=60.0)
    parser.add_argument("--sources", type=lambda s: s.split(","), default=["folder", "s3"])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["events", "relisting"])
    parser.add_argument("--embedder", default="local", help="RSVC_EMBEDDER for the runs.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = main(args)
    print_result(result, args.out)
    if args.out:
        (args.out / "table.md").write_text(table(result), encoding="utf-8")
    return 0 if all(t["met"] for t in result["targets"]) else 1


def table(result: dict[str, Any]) -> str:
    """The result as the docs show it: a row per scenario and kind (seconds)."""
    lines = [
        f"{result['machine']}; {result['settings']['objects']:,} objects, "
        f"{result['settings']['changes']} changes of each kind at "
        f"{result['settings']['rate']:g} a second; seconds from the change at the source to the "
        "answer agreeing.",
        "",
        "| source, mode | kind | n | p50 | p95 | max |",
        "|---|---|---|---|---|---|",
    ]
    for name, run in result["scenarios"].items():
        for kind, row in run["by_kind"].items():
            lines.append(
                f"| {name} | {kind} | {row['n']} | {row['p50']} | {row['p95']} | {row['max']} |"
            )
        for label in ("narrowing", "widening"):
            if row := run[label]:
                lines.append(
                    f"| {name} | **all {label}** | {row['n']} | {row['p50']} | **{row['p95']}** "
                    f"| {row['max']} |"
                )
        lines.append(f"| {name} | missed | {run['missed']} | | | |")
    lines += ["", "| scenario | target | measured | met |", "|---|---|---|---|"]
    lines += [
        f"| {t['scenario']} | {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |"
        for t in result["targets"]
    ]
    return "\n".join(lines) + "\n"
