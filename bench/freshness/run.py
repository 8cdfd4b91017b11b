"""The freshness benchmark's run: a source written, indexed and watched, changes made at a
steady rate, each change's window measured by a prober (see the package's docstring)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
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

from bench.freshness.changes import (
    NARROWING,
    RULES,
    WIDENING,
    Prober,
    Source,
    changes,
    write_source,
)
from bench.freshness.report import summary, table, targets
from bench.freshness.servers import Buckets, bucket_servers
from bench.harness import machine, print_result
from bench.harness.heard import holds
from retrieval_svc.words import say
from tests.support.tcp_proxy import TcpProxy

ALIAS = "rsvc-bench-freshness"
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]
GIVE_UP_S = 600.0
OUTAGE_S = 60.0  # mode "outage": Elasticsearch unreachable to the watcher this long
PAUSE_S = 5.0  # mode "restart": the watcher killed (SIGKILL), started again this much later
INTERRUPTED = ("outage", "restart")
LISTENING = ("events", *INTERRUPTED)  # the modes that hear the source's events


@dataclass
class Setup:
    """What a scenario runs against."""

    es: Elasticsearch
    env: dict[str, str]
    work: Path
    args: argparse.Namespace
    buckets: Buckets | None = None
    results: dict[str, Any] = field(default_factory=dict)


@dataclass
class Prepared:
    """A source written and indexed once, watched in each mode in turn."""

    source: Source
    kb: str
    root: Path
    rules: Path
    written_s: float
    indexed_s: float
    common: list[str]


def prepare(setup: Setup, source_kind: str) -> Prepared:
    """The source written and indexed (an ordinary run), its notifications set up when a
    mode listens to them."""
    args = setup.args
    kb = f"fresh-{source_kind}"
    root = setup.work / kb
    root.mkdir()
    rules = root / "rules.yaml"
    rules.write_text(RULES.format(extra=""), encoding="utf-8")
    if source_kind == "folder":
        source = Source("folder", root)
    else:
        assert setup.buckets is not None
        setup.buckets.s3.create_bucket(Bucket=kb)
        source = Source("s3", root, setup.buckets.s3, kb)
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
    if source_kind == "s3" and any(
        mode in LISTENING for mode in args.modes
    ):  # (from now on: a steady state)
        assert setup.buckets is not None
        source.notify = setup.buckets.listen(kb)
    return Prepared(source, kb, root, rules, written_s, indexed_s, common)


def scenario(setup: Setup, ready: Prepared, mode: str, turn: int) -> dict[str, Any]:
    """One mode over a prepared source: watched (the watcher's first re-listing checks the
    whole source against the index), changed, measured. ``turn`` keeps each mode's changes
    apart from the earlier modes' on the same source."""
    args, es = setup.args, setup.es
    source, kb, root, rules, common = (
        ready.source, ready.kb, ready.root, ready.rules, ready.common
    )  # fmt: skip
    listening = source.kind == "s3" and mode in LISTENING and setup.buckets is not None
    events = setup.buckets.events(kb) if listening and setup.buckets is not None else []
    if mode == "relisting":
        events = ["--events", "none"]
    rescan = str(args.rescan if mode == "relisting" else 600)
    path = root / f"watch-{mode}.log"
    log = path.open("ab")
    closing = contextlib.ExitStack()
    proxy = closing.enter_context(TcpProxy(setup.env["RSVC_ES_URL"])) if mode == "outage" else None
    env = {**setup.env, "RSVC_ES_URL": proxy.url} if proxy else setup.env
    argv = [*CLI, "watch", *common, *events, "--rescan", rescan, "--health-port", "-1"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    watcher = [start()]
    index = f"{args.alias}.*"
    started = time.perf_counter()
    try:
        time.sleep(2.0)
        deadline = time.monotonic() + GIVE_UP_S * 3
        while not _relisted(path.read_text(errors="replace")):
            if time.monotonic() > deadline or watcher[0].poll() is not None:
                raise RuntimeError(f"the watcher did not start: {path.read_text()}")
            time.sleep(1.0)
        first_s = time.perf_counter() - started  # (starting, and its first whole re-listing)
        todo = changes(
            source, index, kb, args.objects, args.changes, args.seed, rules, turn, len(args.modes)
        )
        interrupt = _interruption(mode, proxy, watcher, start)
        with Prober(es) as prober:
            for n, (_, make) in enumerate(todo):
                if n == len(todo) // 4 and interrupt is not None:
                    threading.Thread(target=interrupt, daemon=True).start()
                prober.add(make())
                time.sleep(1.0 / args.rate)
            deadline = time.monotonic() + GIVE_UP_S
            while (prober.pending or prober.keeping) and time.monotonic() < deadline:
                time.sleep(0.5)
            missed = len(prober.pending)
            still_dark = len(prober.keeping)
            done = list(prober.done)
    finally:
        watcher[0].send_signal(signal.SIGTERM)
        watcher[0].wait(timeout=120)
        log.close()
        closing.close()
        if args.out is not None:  # (the watcher's own lines: what a settle waited behind)
            args.out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, args.out / f"watch-{source.kind}-{mode}.log")
    by_kind: dict[str, Any] = {}
    for kind in (*NARROWING, *WIDENING):
        windows = [c.window for c in done if c.kind == kind and c.window is not None]
        if windows:
            by_kind[kind] = summary(windows)
    kept: dict[str, Any] = {}  # how long those who keep access found nothing, by kind
    for kind in (*NARROWING, *WIDENING):
        dark = [c.dark_s for c in done if c.kind == kind and c.kept is not None]
        if dark:
            kept[kind] = summary(dark)
    narrowing = [c.window for c in done if c.kind in NARROWING and c.window is not None]
    widening = [c.window for c in done if c.kind in WIDENING and c.window is not None]
    return {
        "objects": args.objects,
        "written_s": round(ready.written_s, 1),
        "indexed_s": round(ready.indexed_s, 1),
        "changes": len(todo),
        "missed": missed,
        "first_relisting_s": round(first_s, 1),
        "rescan_s": float(rescan) if mode == "relisting" else None,
        "interrupted": {
            "outage": f"Elasticsearch unreachable for {OUTAGE_S:g} s",
            "restart": f"the watcher killed, started again {PAUSE_S:g} s later",
        }.get(mode),
        "narrowing": summary(narrowing) if narrowing else None,
        "widening": summary(widening) if widening else None,
        "by_kind": by_kind,
        "each": [  # (when each change was made and in force: a tail traced to its moment)
            {
                "kind": c.kind,
                "at": _clock(c.at),
                "in_force": _clock(c.done_at) if c.done_at else None,
            }
            for c in sorted(done, key=lambda c: c.at)
        ],
        "kept": kept,
        "still_dark": still_dark,
    }


def _interruption(
    mode: str,
    proxy: TcpProxy | None,
    watcher: list[subprocess.Popen[bytes]],
    start: Callable[[], subprocess.Popen[bytes]],
) -> Callable[[], None] | None:
    """What happens to the watcher a quarter into the changes, while they go on arriving:
    Elasticsearch cut off for ``OUTAGE_S``, or the watcher killed and started again (it takes
    over its dead predecessor's lease, then re-lists)."""
    if mode == "outage" and proxy is not None:

        def outage() -> None:
            proxy.cut()
            time.sleep(OUTAGE_S)
            proxy.restore()

        return outage
    if mode == "restart":

        def restart() -> None:
            watcher[0].kill()
            watcher[0].wait(timeout=60)
            _mark("bench_fresh_killed")
            time.sleep(PAUSE_S)
            watcher[0] = start()
            _mark("bench_fresh_started")

        return restart
    return None


def _relisted(log: str) -> bool:
    """Whether the watcher's log says it has re-listed, in the words of either language (it
    speaks its terminal's: "re-listing", or "重新列举" in a Chinese one)."""
    return holds(log, "what_relisting")


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def _mark(key: str) -> None:
    """When the benchmark killed or started the watcher (stderr, beside the watcher's own
    lines: what a restart's window spent starting and what the watcher spent)."""
    print(say(key, clock=_clock(time.time())), file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> dict[str, Any]:
    es_url = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
    es = Elasticsearch(es_url, request_timeout=60)
    work = Path(tempfile.mkdtemp(prefix="rsvc-fresh-"))
    env = {
        **os.environ,
        "RSVC_ES_URL": es_url,
        "RSVC_INDEX_ALIAS": args.alias,
        "RSVC_EMBEDDER": args.embedder,
    }
    setup = Setup(es, env, work, args)
    closing = contextlib.ExitStack()
    result: dict[str, Any] = {"machine": machine(), "scenarios": {}}
    try:
        if "s3" in args.sources:
            setup.buckets = closing.enter_context(bucket_servers(args.s3_server, work))
            env.update(setup.buckets.env)
        es.options(ignore_status=404).indices.delete(index=f"{args.alias}.*")
        for source_kind in args.sources:
            print(say("bench_fresh_writing", source=source_kind), file=sys.stderr)
            ready = prepare(setup, source_kind)
            for turn, mode in enumerate(args.modes):
                name = f"{source_kind} {mode}"
                print(say("bench_fresh_scenario", name=name), file=sys.stderr)
                result["scenarios"][name] = scenario(setup, ready, mode, turn)
    finally:
        es.options(ignore_status=404).indices.delete(index=f"{args.alias}.*")
        es.options(ignore_status=404).indices.delete_index_template(name=f"{args.alias}-template")
        closing.close()
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
    parser.add_argument(
        "--modes",
        type=lambda s: s.split(","),
        default=["events", "relisting"],
        help="events, relisting, outage (events; Elasticsearch cut off for a minute), restart "
        "(events; the watcher killed and started again).",
    )
    parser.add_argument(
        "--s3-server",
        choices=["seaweedfs", "moto", "minio"],
        default="seaweedfs",
        help="The bucket's server: SeaweedFS (built once by scripts/seaweedfs.sh, about 8 "
        "minutes; the benchmark sends S3's notifications to moto's queue), moto (S3 and SQS "
        "in one process; lists in quadratic time, fine up to about 10,000 objects), or MinIO "
        "(built once by scripts/minio.sh; its webhook posts its own events to the watcher's "
        "--listen: a real server's delivery end to end).",
    )
    parser.add_argument("--embedder", default="local", help="RSVC_EMBEDDER for the runs.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--alias", default=ALIAS, help="The index alias (its indices are deleted before and after)."
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = main(args)
    print_result(result, args.out)
    if args.out:
        (args.out / "table.md").write_text(table(result), encoding="utf-8")
    return 0 if all(t["met"] for t in result["targets"]) else 1
