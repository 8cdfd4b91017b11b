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


@pytest.mark.parametrize(
    "argv",
    [
        ["new-key", "--name", "k", "--mode", "signed"],
        ["new-key", "--name", "k", "--mode", "oidc"],
        ["new-key", "--name", "k", "--for", "dify"],
    ],
    ids=["signed", "oidc", "dify"],
)
def test_new_key_speaks_chinese_in_a_chinese_locale(argv: list[str]) -> None:
    """Every line ``new-key`` prints to its reader is Chinese under zh_CN (the key itself, the
    JSON entry on stdout and a quoted detail aside)."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc

    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = CliRunner(env=env).invoke(svc, argv)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines, done.output
    for line in lines:
        assert CJK.search(line), line
        assert english_left(line) == [], line


@pytest.mark.parametrize(
    ("which", "argv", "said"),
    [
        ("svc", ["nosuch"], "没有命令 'nosuch'。"),
        ("indexer", ["index", "--bogus"], "没有选项 --bogus。"),
        ("indexer", ["index"], "缺少参数 'source'。"),
        ("svc", ["policy", "allow", "anyone"], "缺少参数"),
        ("indexer", ["index", "--knowledge-id", "kb", ".", "--max-doc-bytes", "abc"], "应为整数"),
        ("svc", ["new-key", "--name", "k", "--mode", "bogus"], "'bogus' 不是"),
        ("svc", ["policy", "--db", "sqlite://", "sync-ldap", "s", "--every", "xx"], "时间间隔"),
        ("indexer", ["index", "--knowledge-id", "kb", ".", "--tenant", " x"], "租户 ' x' 为空"),
    ],
    ids=[
        "unknown-command", "unknown-option", "missing-argument", "missing-argument-svc",
        "not-an-integer", "not-a-mode", "not-an-interval", "not-a-tenant",
    ],
)  # fmt: skip
def test_a_mistyped_command_line_is_answered_in_chinese(
    which: str, argv: list[str], said: str
) -> None:
    """Typer's and Click's usage, hint and error under a Chinese locale: Chinese, the command's
    own names aside; English under another locale."""
    from typer.testing import CliRunner

    from indexer.cli import app as indexer
    from retrieval_svc.cli import app as svc

    program = indexer if which == "indexer" else svc
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = CliRunner(env=env).invoke(program, argv)
    assert done.exit_code == 2, done.output
    text = done.stderr
    assert said in text and "用法：" in text and "查看帮助" in text, text
    panel = [line for line in text.splitlines() if not line.startswith("用")]  # (the syntax)
    assert english_left("\n".join(panel)) == [], text
    english = CliRunner(env={**env, "RSVC_LANG": "en"}).invoke(program, argv)
    assert "Usage:" in english.stderr and "用法" not in english.stderr, english.stderr


def test_identity_resolve_says_its_status_in_chinese(tmp_path: Path) -> None:
    """``identity resolve``: 已知/别名/未知 under zh (not "alias"/"unknown" inside a Chinese
    line), the same under English as before."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc

    db = f"sqlite:///{tmp_path}/policy.db"
    zh = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    runner = CliRunner(env=zh)
    grant = ["policy", "--db", db, "grant-role", "wang", "ops", "--tenant", "acme"]
    assert runner.invoke(svc, grant).exit_code == 0
    ask = ["identity", "--db", db, "resolve", "--tenant", "acme"]
    known = runner.invoke(svc, [*ask, "wang"])
    assert known.exit_code == 0 and known.stdout.startswith("已知：wang"), known.output
    nobody = runner.invoke(svc, [*ask, "zhao"])
    assert nobody.exit_code == 1 and nobody.stdout.startswith("未知："), nobody.output
    english = CliRunner(env={**zh, "RSVC_LANG": "en"}).invoke(svc, [*ask, "zhao"])
    assert english.stdout.startswith("unknown: "), english.output


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["grant-role", "wang", "user:bob"], "角色 'user:bob' 是用户，不是角色"),
        (["grant-role", "wang", "anyone"], "表示所有主体"),
        (["grant-role", "user:wang", "ops"], "给出用户 ID 时不要带 'user:'"),
        (["grant-role", "wang", " ops"], "以空白开头或结尾"),
        (["inherit", "ops", "ops"], "角色 'ops' 不能继承自己"),
    ],
    ids=["role-is-user", "role-is-anyone", "user-prefix", "white-space", "inherit-itself"],
)
def test_a_refused_name_is_said_in_chinese(tmp_path: Path, argv: list[str], said: str) -> None:
    """Why the policy refused a name, role or id: Chinese under zh (its values quoted)."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc

    db = f"sqlite:///{tmp_path}/policy.db"
    zh = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = CliRunner(env=zh).invoke(svc, ["policy", "--db", db, *argv, "--tenant", "acme"])
    assert done.exit_code == 2, done.output
    assert said in done.stderr and done.stderr.startswith("错误："), done.stderr
    assert english_left(done.stderr.replace("'", "`")) == [], done.stderr


@pytest.mark.parametrize("script", ["ldap.sh", "pg.sh", "samba-ad.sh", "es.sh"])
@pytest.mark.parametrize(("lang", "said"), [("zh_CN.UTF-8", "用法："), ("C.UTF-8", "usage: ")])
def test_the_server_scripts_speak_the_locale_s_language(script: str, lang: str, said: str) -> None:
    """``scripts/ldap.sh`` and ``scripts/pg.sh`` (the guide starts slapd) say their lines in
    the reader's language, as ``scripts/es.sh`` does; ``_lib.sh``'s ``setup:`` lines and
    ``scripts/test``'s frame use the same ``say2``."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "LANG": lang, "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = subprocess.run(
        [str(root / "scripts" / script), "bogus"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
    setup = subprocess.run(
        ["bash", "-c", f"source {root}/scripts/_say.sh; say2 'setup: x' 'setup：x'"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert setup.stdout.strip() == ("setup：x" if said == "用法：" else "setup: x")


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        (
            "uid=a,ou=people,dc=corp: user id 'user:a' begins with 'user:'; skipped",
            "uid=a,ou=people,dc=corp：用户 ID 'user:a' 以 'user:' 开头；已跳过",
        ),
        ("group 'sales ' is empty", "组 'sales ' 为空"),
        (
            "uid=b,dc=corp: id 'x' is mapped on line 3 too",
            "uid=b,dc=corp：ID 'x' 在第 3 行也有映射",
        ),
        ("map.csv line 4: user id is empty", "map.csv 第 4 行：用户 ID 为空"),
        (
            "foreign security principal S-1-5-21-1 (in cn=g): not in this directory; "
            "nobody holds a group through it",
            "外部安全主体 S-1-5-21-1（属于 cn=g）：不在本目录中；没有人经由它持有组",
        ),
        (
            "pol.csv line 1: a p line must be: p, subject, tenant, knowledge_id, read",
            "pol.csv 第 1 行：p 行必须是：p, subject, tenant, knowledge_id, read",
        ),
        ("policy.csv does not exist", "policy.csv 不存在"),
        ("something no row says", "something no row says"),
    ],
)
def test_why_a_sync_skipped_an_entry_is_said_again_in_chinese(english: str, chinese: str) -> None:
    """The sync's ``skipped:`` detail and a refused name, made in English where decided, said
    in Chinese where printed; a text of no known shape as it is."""
    from retrieval_svc.words import problem

    assert problem(english, "zh") == chinese
    assert problem(english, "en") == english


def test_what_a_policy_change_did_is_said_in_chinese_whole(tmp_path: Path) -> None:
    """``policy allow``/``grant-role``/``inherit`` and their undoing say what they did in the
    reader's language, the change itself included (not "已完成：anyone may read …")."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app

    db = ["policy", "--db", f"sqlite:///{tmp_path / 'p.db'}"]
    changes = [
        ["allow", "anyone", "company", "--tenant", "acme"],
        ["grant-role", "li", "财务", "--tenant", "acme"],
        ["inherit", "财务", "员工", "--tenant", "acme"],
        ["disinherit", "财务", "员工", "--tenant", "acme"],
        ["revoke-role", "li", "财务", "--tenant", "acme"],
        ["disallow", "anyone", "company", "--tenant", "acme"],
        ["disallow", "anyone", "company", "--tenant", "acme"],  # (already so)
    ]
    said = [CliRunner().invoke(app, [*db, *c], env={"RSVC_LANG": "zh"}) for c in changes]
    assert all(r.exit_code == 0 for r in said), [r.output for r in said]
    lines = [r.output.strip() for r in said]
    assert lines[0] == "已完成：anyone 可以读取 acme 中的 company", lines
    assert lines[-1].startswith("未变化"), lines
    assert [english_left(line) for line in lines] == [[]] * len(lines), lines
    english = CliRunner().invoke(app, [*db, *changes[0]], env={"RSVC_LANG": "en"})
    assert english.output.strip() == "done: anyone may read company in acme"


def test_a_value_typer_converts_is_refused_without_pydantic_s_words() -> None:
    """Typer converts an option's value with pydantic: a refused one reads as the word
    table's (Chinese under zh), never "Value error, " or pydantic's English sentence."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc

    env = {"LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    done = CliRunner(env=env).invoke(svc, ["new-key", "--name", "k", "--mode", "bogus"])
    assert done.exit_code == 2 and "'bogus' is not one of" in done.stderr, done.stderr
    assert "Value error" not in done.stderr, done.stderr


def test_an_id_two_directory_entries_share_is_said_in_chinese() -> None:
    """The sync's refusal of an id two entries share (``uid=bob`` and ``uid=Bob``), as the sync
    makes it, is Chinese under a Chinese locale, naming both entries; English as it was."""
    from retrieval_svc.directory.groups import Directory, checked_users
    from retrieval_svc.words import problem

    directory = Directory(
        users={"uid=bob,ou=people,dc=corp": "bob", "uid=Bob,ou=eng,dc=corp": "Bob"}
    )
    users, (refused,) = checked_users(directory)
    assert users == {}
    said = say("sync_skipped", "zh", what=problem(refused, "zh"))
    assert said.startswith("已跳过：用户 ID 'bob' "), said
    assert "uid=bob,ou=people,dc=corp ('bob')" in said and "uid=Bob,ou=eng,dc=corp ('Bob')" in said
    assert english_left(said) == [], said
    assert problem(refused, "en") == refused
    assert refused.startswith("user id 'bob' is held by 2 entries as the directory compares ids")


@pytest.mark.parametrize("stored", [("multilingual-e5-small", 384), None])
def test_an_index_of_another_model_is_refused_in_the_reader_s_language(
    stored: tuple[str, int] | None,
) -> None:
    """The refusal ``index`` and the service's start print when the index holds another model's
    vectors (or none) is said again in Chinese, its names and figures kept."""
    from retrieval_svc.embedding.base import EmbeddingModel
    from retrieval_svc.search.index import mismatch_message
    from retrieval_svc.words import problem

    held = EmbeddingModel(*stored) if stored else None
    english = mismatch_message("kb", "kb.v1", held, EmbeddingModel("bge-m3", 1024))
    chinese = problem(english, "zh")
    assert "rebuild" in english and problem(english, "en") == english
    assert "kb.v1" in chinese and "1024 维" in chinese and "retrieval-indexer rebuild" in chinese
    assert not re.search(r"[A-Za-z]{2,} [A-Za-z]{2,} [A-Za-z]{2,}", re.sub(r"`[^`]*`", "", chinese))
