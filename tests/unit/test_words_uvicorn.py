"""The service's server lines are rows of the word table too: what uvicorn says of the server's
life ("Started server process [N]", "Uvicorn running on … (Press CTRL+C to quit)", "Application
shutdown complete.") reaches a Chinese administrator's terminal in Chinese, with its values; an
English terminal reads uvicorn's own words; a line the table does not know passes unchanged."""

from __future__ import annotations

import logging
import re
import string
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from retrieval_svc.log_words import UVICORN
from retrieval_svc.observability import UvicornWords, say_uvicorn_in_words
from retrieval_svc.words import say

CJK = re.compile(r"[\u4e00-\u9fff]")


async def _app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
    """An ASGI app with a lifespan and nothing else."""
    while scope["type"] == "lifespan":
        message = await receive()  # type: ignore[operator]
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})  # type: ignore[operator]
        else:
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]
            return


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def server_lines() -> Iterator[_Said]:
    """What uvicorn's server logger says, with the service's words on it."""
    logger = logging.getLogger("uvicorn.error")
    said, level, filters = _Said(), logger.level, list(logger.filters)
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    say_uvicorn_in_words()
    try:
        yield said
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
        logger.filters[:] = filters


def _serve_once() -> None:
    """A real uvicorn server on loopback, started and stopped: every line of its life."""
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    server.should_exit = True
    thread.join(timeout=60)
    assert not thread.is_alive()


def _row(lang: int) -> re.Pattern[str]:
    """Any uvicorn row in one language, as the pattern of a whole line."""
    rows = [
        "".join(re.escape(text) + (".+?" if name else "") for text, name, _, _ in parts)
        for parts in (string.Formatter().parse(pair[lang]) for pair in UVICORN.values())
    ]
    return re.compile("|".join(f"(?:{row})" for row in rows))


@pytest.mark.parametrize("lang", ["zh_CN.UTF-8", "C.UTF-8"])
def test_the_server_s_life_is_said_in_the_terminal_s_language(
    monkeypatch: pytest.MonkeyPatch, server_lines: _Said, lang: str
) -> None:
    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    _serve_once()
    lines = server_lines.lines
    # started, startup ×2, running, shutting down, shutdown ×2, finished
    assert len(lines) >= 8, lines
    column = 1 if lang.startswith("zh") else 0
    assert all(_row(column).fullmatch(line) for line in lines), lines
    assert all(bool(CJK.search(line)) == (column == 1) for line in lines), lines
    running = next(line for line in lines if "CTRL+C" in line)
    assert re.search(r"http://127\.0\.0\.1:\d+", running), running  # (its value kept)
    if column == 0:  # uvicorn's own words, unchanged
        assert "Application startup complete." in lines and "Shutting down" in lines, lines
    else:
        assert say("uvicorn_startup_complete", "zh") in lines, lines


@pytest.mark.parametrize(
    ("msg", "args", "english"),
    [
        ("Started server process [%d]", (4242,), "Started server process [4242]"),
        (
            "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)",
            ("http", "0.0.0.0", 8080),
            "Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)",
        ),
        ("Stopping parent process [77]", None, "Stopping parent process [77]"),
        ("Terminated child process [78]", None, "Terminated child process [78]"),
        ("Received SIGINT, exiting.", None, "Received SIGINT, exiting."),
        # (``serve --workers`` binds its socket before uvicorn runs: the socket's own words)
        ("[Errno 98] Address already in use", None, "[Errno 98] Address already in use"),
    ],
)
def test_a_line_keeps_its_values(
    monkeypatch: pytest.MonkeyPatch, msg: str, args: tuple[object, ...] | None, english: str
) -> None:
    monkeypatch.setenv("RSVC_LANG", "zh")
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, msg, args, None)
    assert UvicornWords().filter(record)
    said = record.getMessage()
    assert CJK.search(said) and said != english, said
    assert all(value in said for value in re.findall(r"\d[\d.]*(?::\d+)?", english)), said
    monkeypatch.setenv("RSVC_LANG", "en")
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, msg, args, None)
    assert UvicornWords().filter(record) and record.getMessage() == english


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_line_the_table_does_not_know_passes_unchanged(
    monkeypatch: pytest.MonkeyPatch, lang: str
) -> None:
    monkeypatch.setenv("RSVC_LANG", lang)
    msg, args = "Invalid HTTP request received from %s.", ("1.2.3.4",)
    record = logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, msg, args, None)
    assert UvicornWords().filter(record)
    assert record.getMessage() == "Invalid HTTP request received from 1.2.3.4."
    assert (record.msg, record.args) == (msg, args)


@pytest.mark.parametrize(
    ("lang", "said"), [("zh_CN.UTF-8", "正在关闭"), ("C.UTF-8", "Shutting down")]
)
def test_serve_s_logging_says_uvicorn_s_lines_in_words(lang: str, said: str) -> None:
    """``serve`` configures its log so (a process of its own: the log's set-up is global)."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import logging; from retrieval_svc.observability import configure_logging; "
        "configure_logging(); logging.getLogger('uvicorn.error').info('Shutting down')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES")}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**env, "LANG": lang}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.splitlines()[-1])["message"] == said, done.stderr


def test_each_worker_of_serve_workers_logs_as_serve_does() -> None:
    """``serve --workers N`` runs each worker in a process of its own, built by
    ``app_from_environment``: its log is JSON lines, uvicorn's said in the terminal's language
    (before, a worker's INFO lines were lost and its warnings were plain text)."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import logging; from retrieval_svc.app import app_from_environment; "
        "app_from_environment(); logging.getLogger('uvicorn.error').info('Shutting down')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES")}
    env.update(LANG="zh_CN.UTF-8", RSVC_AUTH_DISABLED="true")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.splitlines()[-1])["message"] == "正在关闭", done.stderr


@pytest.mark.parametrize("lang", ["zh_CN.UTF-8", "C.UTF-8"])
def test_a_port_already_taken_is_said_in_the_terminal_s_language(
    monkeypatch: pytest.MonkeyPatch, server_lines: _Said, lang: str
) -> None:
    """The service's port held by another process: uvicorn cannot bind, says so and gives up —
    in Chinese in a Chinese terminal, the errno and the address kept."""
    import socket

    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        config = uvicorn.Config(_app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
        server = uvicorn.Server(config)
        exits: list[object] = []

        def run() -> None:
            try:
                server.run()
            except SystemExit as gone:  # (uvicorn ends the process so)
                exits.append(gone.code)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive() and not server.started
        assert exits == [3], exits  # (uvicorn's STARTUP_FAILURE)
    lines = server_lines.lines
    bind = [line for line in lines if f"('127.0.0.1', {port})" in line]
    assert len(bind) == 1, lines
    assert bind[0].startswith("[Errno 98] "), bind
    column = 1 if lang.startswith("zh") else 0
    assert all(_row(column).fullmatch(line) for line in lines), lines
    assert all(bool(CJK.search(line)) == (column == 1) for line in lines), lines
    address = f"('127.0.0.1', {port})"
    if column == 0:  # uvicorn's own words, unchanged
        english = f"error while attempting to bind on address {address}: address already in use"
        assert bind[0] == f"[Errno 98] {english}", bind
    else:
        assert bind[0] == say("uvicorn_bind_in_use", "zh", errno=98, address=address), bind
