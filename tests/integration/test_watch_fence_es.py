"""Every writer of a source fenced, every source watched, the reload checked as the start
(design.md §16): ``retrieval-indexer watch`` and ``index`` as an operator runs them beside each
other, against the real Elasticsearch.

Each test is an ordering an operator meets in a year — the nightly run while the watcher works,
two sources of one knowledge base, a watcher killed, stopped past its lease or started again, a
rules file swapped for a link, a share re-mounted, ``--prune`` — and waits (a generous deadline,
never a timing assertion) until the index agrees with the source and stays so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import ApiError, Elasticsearch
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from indexer.sources.local import LocalSource
from tests.integration.test_watch_es import (
    CLI,
    RULES,
    Watching,
    env,
    stored,
    until,
    write,
)
from tests.support import ES_URL
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

WAIT_S = 90.0
RESTRICTED = '{"access_roles": ["董事会"]}'


@pytest.fixture
def running() -> Iterator[list[Watching]]:
    started: list[Watching] = []
    yield started
    for watcher in started:
        if watcher.process.poll() is None:
            watcher.process.send_signal(signal.SIGCONT)
        watcher.stop(signal.SIGKILL)


@pytest.fixture
def share(tmp_path: Path) -> Path:
    root = tmp_path / "share"
    write(root, "公共/甲.md", "# 甲\n\n第一版。")
    write(root, "公共/乙.md", "# 乙\n\n第一版。")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    return root


def stored_of(es: Elasticsearch, alias: str, kb: str) -> Callable[[], dict[str, tuple[str, ...]]]:
    """What ``kb`` holds now (nothing while its new index's shards start: asked again)."""

    def now() -> dict[str, tuple[str, ...]]:
        try:
            return stored(es, alias, kb)
        except ApiError as exc:
            if exc.meta.status != 503:
                raise
            return {}

    return now


def english(alias: str, es_url: str = ES_URL) -> dict[str, str]:
    return {**env(alias, es_url), "RSVC_LANG": "en"}


def watcher_of(share: Path, alias: str, kb: str, *more: str, es_url: str = ES_URL) -> Watching:
    """A watcher of ``share`` speaking English (its lines are asserted on)."""
    argv = [str(share), "--knowledge-id", kb, "--acl-rules", str(share.parent / "rules.yaml"),
            "--health-port", "0", "--workers", "1", *more]  # fmt: skip
    log = share.parent / f"{kb}-{len(list(share.parent.glob(f'{kb}-*.log')))}.log"
    return Watching(argv, english(alias, es_url), log)


def shown(alias: str, kb: str) -> dict[str, Any]:
    run = subprocess.run([*CLI, "show", "--knowledge-id", kb, "--json"], env=env(alias),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    return dict(json.loads(run.stdout).get("last_run") or {})


def lease_roles(es: Elasticsearch, alias: str, kb: str) -> set[str]:
    """The roles holding a lease of ``kb``'s sources now (``index``, ``watch``)."""
    found = es.options(ignore_status=(404, 503)).search(
        index=f"{alias}-runs.*", query={"term": {"knowledge_id": kb}}, size=100
    )
    now = time.time()
    return {
        str(entry.get("role"))
        for hit in found.body.get("hits", {}).get("hits", [])
        for entry in (hit["_source"].get("slots") or {}).values()
        if float(entry.get("expires_at") or 0) > now
    }


def test_two_sources_of_one_knowledge_base_each_have_their_watcher(
    tmp_path: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-two-sources"
    first, second = tmp_path / "一", tmp_path / "二"
    write(first, "公共/甲.md", "# 甲\n\n一。")
    write(second, "公共/乙.md", "# 乙\n\n二。")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    for folder in (first, second):
        running.append(watcher_of(folder, alias, kb, "--rescan", "600"))
    now = stored_of(es_sync, alias, kb)
    until(lambda: now() == {"公共/甲.md": (), "公共/乙.md": ()}, "both indexed", running[1], now)
    # A restricting sidecar in the second source is in force through its own watcher.
    (second / "公共/乙.md.meta.json").write_text(RESTRICTED, encoding="utf-8")
    until(lambda: now().get("公共/乙.md") == ("董事会",), "second source's sidecar", running[1])
    leases = shown(alias, kb).get("leases", [])
    assert {row["source"] for row in leases} == {str(first), str(second)}, leases
    assert {row["role"] for row in leases} == {"watch"}, leases


class GatedSidecars:
    """``LocalSource.sidecar`` of this process holding its answer for the gated keys until the
    test opens the gate: an ``index`` run that has read a document's bytes and its sidecar and
    has not written it yet (the watcher, another process, is not held)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, keys: set[str]) -> None:
        self.keys, self.entered, self.gate = keys, set[str](), threading.Event()
        self._lock = threading.Lock()
        real = LocalSource.sidecar

        def sidecar(source: LocalSource, ref: Any) -> dict[str, Any]:
            answer = real(source, ref)
            if ref.key in self.keys:
                with self._lock:
                    self.entered.add(ref.key)
                self.gate.wait(WAIT_S)
            return answer

        monkeypatch.setattr(LocalSource, "sidecar", sidecar)


def index_run(share: Path, alias: str, kb: str, results: list[Any]) -> threading.Thread:
    """``retrieval-indexer index SHARE --force`` in this process (its reads gated), started."""
    args = ["index", str(share), "--knowledge-id", kb, "--acl-rules",
            str(share.parent / "rules.yaml"), "--workers", "0", "--force", "--json"]  # fmt: skip

    def invoke() -> None:
        results.append(CliRunner().invoke(indexer_cli, args, env=english(alias)))

    thread = threading.Thread(target=invoke, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("order", ["watcher first", "index first", "index after"])
def test_an_index_run_never_writes_what_the_watcher_narrowed_since_it_read(
    share: Path,
    alias: str,
    es_sync: Elasticsearch,
    running: list[Watching],
    monkeypatch: pytest.MonkeyPatch,
    order: str,
) -> None:
    """The nightly run reads 甲 and 乙; then 甲 is given a restricting sidecar and 乙 is
    deleted; then the run writes what it read. Neither may answer wider than the source."""
    kb = "fence-index-" + {"watcher first": "w", "index first": "i", "index after": "a"}[order]
    now = stored_of(es_sync, alias, kb)
    wanted = {"公共/甲.md": ("董事会",)}
    results: list[Any] = []
    watcher = watcher_of(share, alias, kb, "--rescan", "600")
    if order == "index after":  # (the watcher settles the change, then the run comes)
        running.append(watcher)
        until(lambda: len(now()) == 2, "first pass", watcher)
        (share / "公共/甲.md.meta.json").write_text(RESTRICTED, encoding="utf-8")
        (share / "公共/乙.md").unlink()
        until(lambda: now() == wanted, "the watcher settled the change", watcher, now)
        index_run(share, alias, kb, results).join(WAIT_S * 2)
        assert results and results[0].exit_code == 0, results and results[0].output
        until(lambda: now() == wanted, "after the run", watcher, now)
        return
    gated = GatedSidecars(monkeypatch, {"公共/甲.md", "公共/乙.md"})
    if order == "watcher first":
        running.append(watcher)
        until(lambda: len(now()) == 2, "first pass", watcher)
    run = index_run(share, alias, kb, results)
    try:
        until(lambda: len(gated.entered) == 2, "the run read both", watcher if running else None)
        if order == "index first":
            running.append(watcher)
        (share / "公共/甲.md.meta.json").write_text(RESTRICTED, encoding="utf-8")
        (share / "公共/乙.md").unlink()
        # Either the run holds the source (the watcher waits for it) or the watcher has
        # settled the change beside the run — which is what the run must then not write over.
        settled = lambda: "index" in lease_roles(es_sync, alias, kb) or now() == wanted  # noqa: E731
        until(settled, "settled", watcher)
    finally:
        gated.gate.set()
        run.join(WAIT_S * 2)
    assert results, "the index run did not end"
    why = "the run wrote older roles, or a deleted file back"
    until(lambda: now() == wanted, why, watcher, now)
    time.sleep(2)  # (and it stays so: nothing of the run lands later)
    assert now() == wanted


def test_a_rules_file_swapped_for_a_link_is_refused_on_reload(
    tmp_path: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-rules-link"
    root = tmp_path / "share"
    write(root, "secret/pay.md", "# 工资\n\n机密。")
    write(root, "pub/a.md", "# 公告\n\n公开。")
    rules = root / "acl-rules.yaml"
    rules.write_text(
        "unmatched: refuse\nrules:\n  - match: secret/**\n    access_roles: [hr]\n"
        "  - match: pub/**\n    access_roles: []\n",
        encoding="utf-8",
    )
    argv = [str(root), "--knowledge-id", kb, "--acl-rules", str(rules), "--health-port", "0",
            "--workers", "1", "--rescan", "2"]  # fmt: skip
    watcher = Watching(argv, english(alias), tmp_path / "watch.log")
    running.append(watcher)
    now = stored_of(es_sync, alias, kb)
    until(lambda: now() == {"secret/pay.md": ("hr",), "pub/a.md": ()}, "first pass", watcher)
    opened = tmp_path / "outside" / "open.yaml"
    opened.parent.mkdir()
    opened.write_text(
        "unmatched: public\nrules:\n  - match: secret/**\n    access_roles: []\n", encoding="utf-8"
    )
    link = root / ".swap"
    link.symlink_to(opened)
    os.replace(link, rules)  # (the rules file is a link to the open one now)
    until(lambda: "not reloaded" in watcher.said() or "changed" in watcher.said(), "reloaded?")
    relistings = watcher.said().count("re-listing:")
    until(lambda: watcher.said().count("re-listing:") >= relistings + 2, "two re-listings", watcher)
    assert now()["secret/pay.md"] == ("hr",), watcher.said()[-2000:]
    # ``index`` refuses the same file (exit 2): the reload is the start.
    argv = ["index", str(root), "--knowledge-id", kb, "--acl-rules", str(rules)]
    run = subprocess.run([*CLI, *argv], env=english(alias), capture_output=True, timeout=300)
    assert run.returncode == 2, run.stderr


def test_watch_prune_takes_over_as_index_prune_does(
    tmp_path: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-prune"
    old, new = tmp_path / "A", tmp_path / "B"
    write(old, "a/keep.md", "# 留\n\n旧。")
    write(old, "a/gone.md", "# 去\n\n旧。")
    write(new, "b/x.md", "# 新\n\n新。")
    run = subprocess.run([*CLI, "index", str(old), "--knowledge-id", kb, "--workers", "0"],
                         env=english(alias), capture_output=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    now = stored_of(es_sync, alias, kb)
    assert set(now()) == {"a/keep.md", "a/gone.md"}
    argv = [str(new), "--knowledge-id", kb, "--prune", "--health-port", "0", "--workers", "1",
            "--rescan", "600"]  # fmt: skip
    watcher = Watching(argv, english(alias), tmp_path / "watch.log")
    running.append(watcher)
    until(lambda: now() == {"b/x.md": ()}, "B is the knowledge base's only source", watcher, now)


def test_a_folder_replaced_under_the_watcher_is_watched_again(
    share: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-root"
    watcher = watcher_of(share, alias, kb, "--rescan", "600")  # (events only, in the test)
    running.append(watcher)
    now = stored_of(es_sync, alias, kb)
    until(lambda: len(now()) == 2, "first pass", watcher)
    # A deploy's swap: the folder renamed away and an identical copy renamed into its place.
    copy = share.with_name("share.new")
    shutil.copytree(share, copy, symlinks=True)
    share.rename(share.with_name("share.old"))
    copy.rename(share)
    (share / "公共/甲.md.meta.json").write_text(RESTRICTED, encoding="utf-8")
    until(lambda: now().get("公共/甲.md") == ("董事会",), "heard in the new folder", watcher, now)
    until(lambda: any(w.get("root_changed_at") for w in shown(alias, kb).get("watchers", [])),
          "the status record names the replacement", watcher)  # fmt: skip
    # Unmounted: named in the health record; back: watched and re-listed.
    share.rename(share.with_name("share.away"))
    port = int(re.findall(r"on port (\d+)", watcher.said())[0])

    def ready_says() -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as answer:
                return str(answer.read().decode())
        except urllib.error.HTTPError as exc:
            return str(exc.read().decode())

    until(lambda: "source:" in ready_says(), "the health record names the lost folder", watcher)
    share.with_name("share.away").rename(share)
    (share / "公共/乙.md").unlink()
    until(lambda: "公共/乙.md" not in now(), "the folder back, watched again", watcher, now)
    assert watcher.stop() == 0, watcher.said()[-3000:]


def test_a_watcher_started_again_takes_over_its_own_lease_at_once(
    share: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-restart"
    first = watcher_of(share, alias, kb, "--lease-ttl", "600")  # (its lease would last)
    running.append(first)
    now = stored_of(es_sync, alias, kb)
    until(lambda: len(now()) == 2, "first pass", first)
    first.stop(signal.SIGKILL)
    (share / "公共/乙.md").unlink()
    again = watcher_of(share, alias, kb, "--lease-ttl", "600")
    running.append(again)
    until(lambda: "公共/乙.md" not in now(), "the successor waits out the lease", again, now)


def test_a_lone_watcher_stopped_past_its_lease_carries_on(
    share: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-lone"
    watcher = watcher_of(share, alias, kb, "--lease-ttl", "3", "--rescan", "600")
    running.append(watcher)
    now = stored_of(es_sync, alias, kb)
    until(lambda: len(now()) == 2, "first pass", watcher)
    for round_ in range(3):  # (its renewal and a settle due at once, each time it wakes)
        watcher.process.send_signal(signal.SIGSTOP)
        write(share, f"公共/新{round_}.md", f"# 新\n\n{round_}。")
        time.sleep(5)  # (starved of CPU past its lease's time)
        watcher.process.send_signal(signal.SIGCONT)
        until(lambda r=round_: f"公共/新{r}.md" in now(), "settled after waking", watcher, now)
    assert watcher.process.poll() is None, watcher.said()[-3000:]
    assert "taken by" not in watcher.said(), watcher.said()[-3000:]


def test_a_holder_starved_past_its_lease_steps_back_and_never_writes(
    share: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-starved"
    first = watcher_of(share, alias, kb, "--lease-ttl", "3", "--rescan", "600")
    running.append(first)
    now = stored_of(es_sync, alias, kb)
    until(lambda: len(now()) == 2, "first pass", first)
    second = watcher_of(share, alias, kb, "--lease-ttl", "3", "--rescan", "600")
    running.append(second)
    until(lambda: "holds the lease of" in second.said(), "the second waits", second)
    first.process.send_signal(signal.SIGSTOP)  # (alive, its lease lapsing)
    (share / "公共/甲.md.meta.json").write_text(RESTRICTED, encoding="utf-8")
    until(lambda: now().get("公共/甲.md") == ("董事会",), "the second took over", second, now)
    first.process.send_signal(signal.SIGCONT)
    until(lambda: "waits for the lease again" in first.said(), "the first stepped back", first)
    assert now().get("公共/甲.md") == ("董事会",)
    assert first.process.poll() is None, first.said()[-3000:]  # (a standby, not a crash)
    second.stop(signal.SIGKILL)  # (and the standby takes over when the holder dies)
    (share / "公共/乙.md").unlink()
    until(lambda: "公共/乙.md" not in now(), "the standby took over", first, now)


def test_a_stalled_elasticsearch_is_said_in_seconds(
    share: Path, alias: str, es_sync: Elasticsearch, running: list[Watching]
) -> None:
    kb = "fence-stall"
    with TcpProxy(ES_URL) as proxy:
        watcher = watcher_of(share, alias, kb, es_url=proxy.url)
        running.append(watcher)
        until(lambda: len(stored_of(es_sync, alias, kb)()) == 2, "first pass", watcher)
        proxy.delay_s = 300.0  # (connections open, nothing answered)
        until(lambda: "Elasticsearch does not answer" in watcher.said(), "said", watcher)
        port = int(re.findall(r"on port (\d+)", watcher.said())[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        assert re.search(r'rsvc_watch_problem\{[^}]*what="elasticsearch"[^}]*\} 1\.0', metrics)
        proxy.delay_s = 0.0
        until(lambda: "Elasticsearch answers again" in watcher.said(), "answers again", watcher)
