"""Why a connection failed, in the reader's language: a closed port, a name that does not
resolve — said by the word table, not the client library's English ("Cannot connect to host
… ssl:default [Connect call failed …]"), in every line that names a server the command could
not reach (Elasticsearch, the directory, the embedding server)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from tests.unit.test_words import ENGLISH_SENTENCE

CLOSED = "127.0.0.1:1"  # (port 1: nothing listens there)


def english_anywhere(text: str) -> list[str]:
    """English sentences in ``text``, inside brackets too (URLs and commands aside)."""
    return ENGLISH_SENTENCE.findall(re.sub(r"\S+://\S+|`[^`]*`", "", text))


def test_a_closed_port_and_an_unknown_name_are_said_in_both_languages() -> None:
    from retrieval_svc.causes import cause

    refused = socket.socket()
    try:
        with pytest.raises(OSError) as closed:
            refused.connect(("127.0.0.1", 1))
    finally:
        refused.close()
    wrapped = RuntimeError("Cannot connect to host 127.0.0.1:1 ssl:default")
    wrapped.__cause__ = closed.value
    assert cause(wrapped, "en") == "connection refused, nothing listens there"
    assert cause(wrapped, "zh") == "连接被拒绝，那里没有服务在监听"
    with pytest.raises(socket.gaierror) as unknown:
        socket.getaddrinfo("no-such-host.invalid", 80)
    assert cause(unknown.value, "zh") == "主机名无法解析"
    ldap3_said = OSError("socket connection error while opening: [Errno 111] Connection refused")
    assert cause(ldap3_said, "zh") == "连接被拒绝，那里没有服务在监听"
    assert cause(ValueError("something else"), "zh") is None


def _sync_file(tmp: Path) -> Path:
    path = tmp / "ldap.yaml"
    path.write_text(
        f"tenant: acme\nurl: ldap://{CLOSED}\nbind_dn: cn=admin,dc=x\nbind_password_env: PW\n"
        "users:\n  base: ou=people,dc=x\ngroups:\n  base: ou=groups,dc=x\n"
        "roles:\n  cn=g,ou=groups,dc=x: [ops]\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("what", ["indexer", "audit", "directory", "embedder"])
def test_a_server_at_a_closed_port_is_said_in_chinese(tmp_path: Path, what: str) -> None:
    from typer.testing import CliRunner

    from indexer.cli import app as indexer
    from retrieval_svc.cli import app as svc

    (tmp_path / "a.md").write_text("# a\n", encoding="utf-8")
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": "",
           "RSVC_ES_URL": f"http://{CLOSED}", "PW": "x"}  # fmt: skip
    index = ["index", "--knowledge-id", "kb", str(tmp_path)]
    program, argv = {
        "indexer": (indexer, index),
        "audit": (svc, ["audit", "search"]),
        "directory": (
            svc,
            [
                "policy",
                "--db",
                f"sqlite:///{tmp_path}/p.db",
                "sync-ldap",
                str(_sync_file(tmp_path)),
            ],
        ),
        "embedder": (indexer, index),
    }[what]
    if what == "audit":
        env["RSVC_AUDIT"] = "elasticsearch"
    if what == "embedder":
        env |= {"RSVC_EMBEDDER": "openai", "RSVC_EMBEDDING_MODEL": "m",
                "RSVC_EMBEDDING_URL": f"http://{CLOSED}/v1"}  # fmt: skip
    done = CliRunner(env=env).invoke(program, argv)
    assert done.exit_code == 3, done.output
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("错误：") and "连接被拒绝" in said, said
    server = {"embedder": "嵌入服务", "directory": "ldap://"}.get(what, "Elasticsearch")
    assert server in said, said
    assert english_anywhere(said) == [], said
    english = CliRunner(env={**env, "LANG": "C.UTF-8"}).invoke(program, argv)
    assert "connection refused" in english.stderr, english.stderr


@pytest.mark.parametrize(("lang", "down", "back"), [
    ("zh_CN.UTF-8", "连不上 Elasticsearch（ConnectionError）", "Elasticsearch 在 "),
    ("C.UTF-8", "Elasticsearch is unreachable (ConnectionError)", "Elasticsearch is reachable"),
])  # fmt: skip
def test_the_service_logs_an_unreachable_cluster_in_the_locale_s_language(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, lang: str, down: str,
    back: str,
) -> None:  # fmt: skip
    """The service's own log lines are rows too: an operator in a Chinese locale reads
    Chinese (``retrieval_svc.log_words``)."""
    import logging

    from retrieval_svc.search.failures import Reachability

    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    reach = Reachability()
    with caplog.at_level(logging.WARNING, logger="retrieval_svc.search.failures"):
        reach.failed("ConnectionError")
        reach.reached()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and said[0].startswith(down) and said[1].startswith(back), said
