"""Every line the command lines print has both languages (issue #58 §3): the same named values
in English and Chinese, the Chinese in Chinese; the locale picks one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retrieval_svc.words import LINES, cli_language, fields, say

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("key", sorted(LINES))
def test_each_line_in_both_languages_takes_the_same_values(key: str) -> None:
    english, chinese = LINES[key]
    assert fields(english) == fields(chinese), key
    assert CJK.search(chinese), f"{key}: {chinese!r} is not Chinese"
    assert not CJK.search(english.replace("{", "").replace("}", "")), key


@pytest.mark.parametrize(
    ("env", "lang"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "zh_CN.UTF-8", "LC_ALL": "C.UTF-8"}, "en"),
        ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_TW.UTF-8"}, "zh"),
        ({"LANG": "zh_CN.UTF-8", "RSVC_LANG": "en"}, "en"),
        ({"RSVC_LANG": "zh"}, "zh"),
    ],
)
def test_the_locale_picks_the_language(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], lang: str
) -> None:
    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli_language() == lang


def test_a_line_with_its_values() -> None:
    assert say("seen", "en", seen=3, bytes="1,024") == "3 documents seen, 1,024 bytes read"
    assert say("seen", "zh", seen=3, bytes="1,024") == "共见到 3 个文档，读取 1,024 字节"


@pytest.mark.parametrize(("lang", "said"), [("C.UTF-8", "done: "), ("zh_CN.UTF-8", "已完成：")])
def test_retrieval_svc_policy_speaks_the_locale_s_language(
    tmp_path: Path, lang: str, said: str
) -> None:
    from typer.testing import CliRunner

    from retrieval_svc.cli import app

    db = f"sqlite:///{tmp_path}/policy.db"
    env = {"LANG": lang, "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = CliRunner(env=env).invoke(
        app, ["policy", "--db", db, "allow", "anyone", "kb-*", "--tenant", "acme"]
    )
    assert done.exit_code == 0, done.output
    assert done.output.startswith(said), done.output


# An English sentence: three English words in a row, outside the brackets that quote a
# library's own detail (a connection error's cause, a YAML parser's problem).
ENGLISH_SENTENCE = re.compile(r"[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}")


def english_left(text: str) -> list[str]:
    """The English sentences in ``text`` outside brackets."""
    outside = re.sub(r"（[^（）]*）|\([^()]*\)|`[^`]*`", "", text)
    return ENGLISH_SENTENCE.findall(outside)


def _error_paths(tmp_path: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    share = tmp_path / "share"
    share.mkdir()
    (share / "a.md").write_text("# a\n", encoding="utf-8")
    bad_rules = tmp_path / "bad.yaml"
    bad_rules.write_text("rules: [[[\n", encoding="utf-8")
    nowhere = {"RSVC_ES_URL": "http://127.0.0.1:1"}
    index = ["index", "--knowledge-id", "kb"]
    return [
        ("indexer", [*index, str(tmp_path / "missing")], nowhere),
        ("indexer", [*index, str(share)], nowhere),
        ("indexer", [*index, str(share), "--acl-rules", str(bad_rules)], nowhere),
        ("svc", ["policy", "allow", "anyone", "kb-*", "--tenant", "acme"], {}),
    ]


@pytest.mark.parametrize("case", range(4), ids=["missing-folder", "es-down", "bad-rules", "no-db"])
def test_the_commands_error_paths_say_no_english_sentence_in_a_chinese_locale(
    tmp_path: Path, case: int
) -> None:
    """A Chinese administrator's terminal: the errors for a missing folder, an unreachable
    Elasticsearch, a rules file that is not YAML and a missing policy database are Chinese
    (a library's detail quoted in brackets aside)."""
    from typer.testing import CliRunner

    from indexer.cli import app as indexer
    from retrieval_svc.cli import app as svc

    which, argv, extra = _error_paths(tmp_path)[case]
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": "", **extra}
    done = CliRunner(env=env).invoke(indexer if which == "indexer" else svc, argv)
    assert done.exit_code != 0, done.output
    said = done.output.strip()
    assert said and CJK.search(said), said
    assert english_left(said) == [], said
