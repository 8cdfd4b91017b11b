"""The newcomer's path (issue #12): ``scripts/es.sh`` from a private folder, and
``scripts/demo`` with its port taken and then with ``RSVC_PORT``.

These run the real scripts as a user would, against the real Elasticsearch the suite started
(the demo) or a second node they start themselves (es.sh), so they are slow-ish (~1 min).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.search.index import template_name
from tests.support import ES_URL
from tests.support.fake_provider import free_port

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

ROOT = Path(__file__).resolve().parents[2]


def script_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would have, without the suite's RSVC_ settings, in the
    C.UTF-8 locale (these tests read the scripts' English lines; ``extra`` may set another)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RSVC_")}
    return {**env, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", **extra}


def free_pair() -> int:
    """A port p with p + 100 free too (es.sh puts the transport there)."""
    for _ in range(50):
        port = free_port()
        if port + 100 < 65536:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 100))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port pair")


def demo_banner(demo: subprocess.Popen[str], last: str) -> str:
    """What ``scripts/demo`` prints up to its banner's line holding ``last`` (5 minutes at most:
    a first run installs)."""
    assert demo.stdout is not None
    banner, deadline = "", time.monotonic() + 300
    for line in demo.stdout:
        banner += line
        if last in line or time.monotonic() > deadline:
            break
    return banner


def test_es_script_runs_from_a_private_folder(tmp_path: Path) -> None:
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)  # as root's home and every `mktemp -d`
    cache = private / "checkout" / ".cache" / "es"
    port = free_pair()
    env = script_env(RSVC_ES_CACHE=str(cache), RSVC_ES_PORT=str(port), RSVC_ES_HEAP="256m")
    es_sh = str(ROOT / "scripts" / "es.sh")
    started = None
    try:
        started = subprocess.run(
            [es_sh, "start"], env=env, capture_output=True, text=True, timeout=600
        )
        assert started.returncode == 0, started.stderr[-3000:]
        url = started.stdout.strip()
        assert url == f"http://127.0.0.1:{port}"
        assert "\x1b[" not in started.stderr  # no colour codes from Maven
        if os.geteuid() == 0:  # run as rsvc-es, which cannot enter the private folder
            assert "not reachable by user rsvc-es" in started.stderr
        health = httpx.get(f"{url}/_cluster/health", timeout=10).json()
        assert health["status"] in ("green", "yellow")
        status = subprocess.run([es_sh, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and "running" in status.stdout
    finally:
        # RSVC_ES_URL set (to another cluster) must not keep `stop` from stopping ours.
        stopped = subprocess.run(
            [es_sh, "stop"], env={**env, "RSVC_ES_URL": ES_URL}, capture_output=True, text=True
        )
        moved = re.search(
            r"running from (/var/tmp/retrieval-svc-es/\w+)", started.stderr if started else ""
        )
        if moved:  # the unpacked home and data of this test's node: not left behind
            shutil.rmtree(moved.group(1), ignore_errors=True)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr, stopped.stderr
    assert "not touched" in stopped.stderr
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("lang", ["", "zh_CN.UTF-8"])
def test_demo_on_a_taken_port_stops_with_a_clear_message(taken_port: int, lang: str) -> None:
    result = subprocess.run(
        [str(ROOT / "scripts" / "demo")],
        env=script_env(RSVC_PORT=str(taken_port), RSVC_ES_URL=ES_URL, LANG=lang, LC_ALL=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    said = f"port {taken_port} is already in use" if not lang else f"端口 {taken_port} 已被"
    assert said in result.stderr, result.stderr
    assert "RSVC_PORT" in result.stderr
    assert "is serving on" not in result.stdout  # no banner for a server that is not ours


# README.md's claim, checked against the running demo.
README_RANKS = {"vector": 1, "hybrid": 2, "bm25": 3}
README_SENTENCE = "`bm25` alone ranks it third"


def test_demo_serves_and_its_curl_answers(es_sync: Elasticsearch, tmp_path: Path) -> None:
    alias = f"rsvc-test-demo-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = script_env(
        RSVC_PORT=str(port),
        RSVC_ES_URL=ES_URL,
        RSVC_INDEX_ALIAS=alias,
        RSVC_DEMO_DIR=str(tmp_path / "demo"),
    )
    errors = (tmp_path / "demo.err").open("w")
    demo = subprocess.Popen(
        [str(ROOT / "scripts" / "demo")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        start_new_session=True,
    )
    try:
        banner = demo_banner(demo, "Press Ctrl-C")  # (C.UTF-8: English)
        assert f"is serving on http://127.0.0.1:{port}" in banner, banner
        key = re.search(r"Bearer (rsvc_[\w-]+)", banner)
        assert key is not None
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        # What README.md and the demo's banner say of this question, mode by mode (1-based
        # rank of the visitor guide in the top 3; None: not in it). They must not drift.
        ranks = {}
        for mode in ("vector", "hybrid", "bm25"):
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/search",
                json={
                    "query": "外来人员怎样进入写字楼",
                    "knowledge_ids": ["building-ops"],
                    "top_k": 3,
                    "mode": mode,
                },
                headers=headers,
                timeout=30,
            )
            assert answer.status_code == 200
            body = answer.json()
            assert body["meta"]["mode"] == mode
            titles = [c["document_title"] for c in body["chunk_metadata"]]
            guide = "访客与会议室服务指南"
            ranks[mode] = titles.index(guide) + 1 if guide in titles else None
        assert ranks == README_RANKS, ranks
        readme = (ROOT / "README.md").read_text("utf-8")
        assert README_SENTENCE in readme and "finds (" in banner
        # The custom tool's OpenAPI document names the port the demo serves on.
        tool = httpx.get(f"http://127.0.0.1:{port}/v1/tools/openapi.json", timeout=30).json()
        assert tool["servers"][0]["url"] == f"http://127.0.0.1:{port}"
        # An English terminal's demo answers a request naming no language in English.
        assert not CJK.search(unnamed_language_error(port, headers)), banner
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)
        if demo.stdout is not None:
            demo.stdout.close()
        errors.close()
        # It says what it stopped, and that an Elasticsearch it did not start keeps running.
        said = (tmp_path / "demo.err").read_text()
        assert f"Elasticsearch at {ES_URL} keeps running" in said, said[-2000:]
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-runs.*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))


CJK = re.compile("[\u4e00-\u9fff]")


def unnamed_language_error(port: int, headers: dict[str, str]) -> str:
    """The ``error_msg`` of a request without Accept-Language (as Dify sends): no query."""
    refused = httpx.post(
        f"http://127.0.0.1:{port}/retrieval", json={"knowledge_id": "building-ops"},
        headers=headers, timeout=30,
    )  # fmt: skip
    assert refused.status_code in (400, 422), refused.text
    return str(refused.json()["error_msg"])


@pytest.mark.parametrize(
    ("given", "chinese"), [(None, True), ("en", False)], ids=["default", "set-en"]
)
def test_demo_in_a_chinese_terminal_answers_dify_in_chinese(
    es_sync: Elasticsearch, tmp_path: Path, given: str | None, chinese: bool
) -> None:
    """Under zh_CN.UTF-8 the demo's service speaks Chinese to a request that names no language
    (RSVC_DEFAULT_LANGUAGE=zh-CN), unless the user set RSVC_DEFAULT_LANGUAGE."""
    alias = f"rsvc-test-demo-zh-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = script_env(
        RSVC_PORT=str(port), RSVC_ES_URL=ES_URL, RSVC_INDEX_ALIAS=alias,
        RSVC_DEMO_DIR=str(tmp_path / "demo"), LANG="zh_CN.UTF-8", LC_ALL="",
        **({"RSVC_DEFAULT_LANGUAGE": given} if given else {}),
    )  # fmt: skip
    errors = (tmp_path / "demo.err").open("w")
    demo = subprocess.Popen(
        [str(ROOT / "scripts" / "demo")], env=env, stdout=subprocess.PIPE, stderr=errors,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        banner = demo_banner(demo, "按 Ctrl-C")
        key = re.search(r"Bearer (rsvc_[\w-]+)", banner)
        assert key is not None, banner
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        said = unnamed_language_error(port, headers)
        assert bool(CJK.search(said)) == chinese, said
        tool = httpx.get(f"http://127.0.0.1:{port}/v1/tools/openapi.json", timeout=30).json()
        assert bool(CJK.search(tool["info"]["description"])) == chinese, tool["info"]
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)
        if demo.stdout is not None:
            demo.stdout.close()
        errors.close()
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-runs.*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=template_name(alias))


@pytest.mark.parametrize("lang", ["C.UTF-8", "zh_CN.UTF-8"])
def test_es_start_on_a_port_another_cluster_holds_never_steers_toward_it(
    tmp_path: Path, lang: str
) -> None:
    """RSVC_ES_PORT names the port the suite's own Elasticsearch answers on — a cluster this
    script did not start: it refuses, and never suggests pointing RSVC_ES_URL at it."""
    theirs = urlsplit(ES_URL).port or 9200
    env = script_env(
        RSVC_ES_CACHE=str(tmp_path / "cache"), RSVC_ES_PORT=str(theirs), LC_ALL=lang, LANG=lang
    )
    refused = subprocess.run(
        [str(ROOT / "scripts" / "es.sh"), "start"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "RSVC_ES_URL" not in refused.stderr and ES_URL not in refused.stderr, refused.stderr
    assert str(theirs) in refused.stderr and "RSVC_ES_PORT" in refused.stderr, refused.stderr
    assert bool(re.search("[\u4e00-\u9fff]", refused.stderr)) == lang.startswith("zh")


@pytest.fixture
def port_9200_taken() -> Iterator[None]:
    """9200 taken by something this checkout did not start: another team's Elasticsearch
    when one answers there, else a listening socket held for the test."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 9200))
            holder.listen()
        except OSError:
            pass  # (already taken)
        yield


@pytest.mark.parametrize("port_given", [False, True], ids=["port-chosen", "port-given"])
def test_es_start_with_9200_taken_picks_a_free_port_and_remembers_it(
    tmp_path: Path, port_9200_taken: None, port_given: bool
) -> None:
    """9200 taken: `start` starts on a free port — one it chose (no RSVC_ES_PORT), or the one
    RSVC_ES_PORT gave — leaves 9200 alone, and `status`, `url` and `stop` find it without
    being told the port again (never pointing at what answers on 9200)."""
    cache = tmp_path / "cache"
    env = script_env(RSVC_ES_CACHE=str(cache), RSVC_ES_HEAP="256m")
    es_sh = str(ROOT / "scripts" / "es.sh")
    started = None
    try:
        started = subprocess.run(
            [es_sh, "start"],
            env={**env, "RSVC_ES_PORT": str(free_port())} if port_given else env,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr[-3000:]
        url = started.stdout.strip()
        assert url != "http://127.0.0.1:9200" and "RSVC_ES_URL" not in started.stderr, url
        if not port_given:
            assert "9200" in started.stderr and "left alone" in started.stderr, started.stderr
        health = httpx.get(f"{url}/_cluster/health", timeout=10).json()
        assert health["cluster_name"] == "retrieval-svc-dev"
        status = subprocess.run([es_sh, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and url in status.stdout, status.stdout + status.stderr
        said = subprocess.run([es_sh, "url"], env=env, capture_output=True, text=True)
        assert said.stdout.strip() == url
    finally:
        stopped = subprocess.run([es_sh, "stop"], env=env, capture_output=True, text=True)
        moved = re.search(
            r"running from (/var/tmp/retrieval-svc-es/\w+)", started.stderr if started else ""
        )
        if moved:
            shutil.rmtree(moved.group(1), ignore_errors=True)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr, stopped.stderr
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/", timeout=2)


def test_es_clean_removes_the_copy_outside_the_clone(tmp_path: Path) -> None:
    import hashlib

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    cache = private / "cache"
    cache.mkdir()
    (cache / "marker").write_text("x")
    digest = hashlib.sha256(str(cache.resolve()).encode()).hexdigest()[:12]
    outside = Path("/var/tmp/retrieval-svc-es") / digest
    if os.geteuid() == 0:  # (only root runs Elasticsearch from a copy outside the cache)
        (outside / "home").mkdir(parents=True)
    env = script_env(RSVC_ES_CACHE=str(cache), RSVC_ES_PORT=str(free_port()))
    done = subprocess.run(
        [str(ROOT / "scripts" / "es.sh"), "clean"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert not cache.exists() and not outside.exists(), done.stderr
    assert "removed" in done.stderr
