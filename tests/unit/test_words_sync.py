"""``policy sync-ldap``'s refusals of its file and the permission history's warnings, in a
Chinese locale: the file missing, not YAML, missing fields, the bind password unset, a policy
database that cannot be opened — Chinese (a parser's quoted detail aside), English as before
under an English locale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_words import CJK, english_left

FILES = {
    "not-yaml": "tenant: acme\nurl: [[[\n",
    "fields": "tenant: acme\nbogus: 1\n",
    "password": "tenant: acme\nurl: ldap://127.0.0.1:1\nbind_dn: cn=a,dc=x\n"
    "bind_password_env: RSVC_TEST_UNSET_PW\nusers:\n  base: dc=x\ngroups:\n  base: dc=x\n"
    "roles:\n  cn=g,dc=x: [ops]\n",
}


@pytest.mark.parametrize("name", ["missing", *FILES, "database"])
def test_sync_ldap_refuses_its_file_in_chinese(tmp_path: Path, name: str) -> None:
    from typer.testing import CliRunner

    from retrieval_svc.cli import app as svc

    path = tmp_path / f"{name}.yaml"
    if name in FILES:
        path.write_text(FILES[name], encoding="utf-8")
    db = f"sqlite:///{tmp_path}/p.db"
    if name == "database":  # (a good file, a database whose folder does not exist)
        path.write_text(FILES["password"], encoding="utf-8")
        db = f"sqlite:///{tmp_path}/no/such/folder/p.db"
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": "",
           "RSVC_TEST_UNSET_PW": "x" if name == "database" else None}  # fmt: skip
    argv = ["policy", "--db", db, "sync-ldap", str(path), "--dry-run"]
    if name == "database":
        argv = ["policy", "--db", db, "allow", "anyone", "kb", "--tenant", "acme"]
    done = CliRunner(env=env).invoke(svc, argv)
    assert done.exit_code != 0, done.output
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("错误：") and CJK.search(said), said
    assert english_left(said.replace("'", "`")) == [], said
    english = CliRunner(env={**env, "LANG": "C.UTF-8"}).invoke(svc, argv)
    assert english.stderr.strip().splitlines()[-1].startswith("error: "), english.output


def test_a_rules_edit_not_recorded_is_warned_of_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    """``watch``'s warning when a rules edit cannot be written to the permission history
    (``RulesEditRecorder``): Chinese, naming the database and why."""
    from indexer.convergence import RulesEditRecorder
    from indexer.permissions.rules import parse_rules
    from indexer.report import Report
    from retrieval_svc.settings import IndexSettings

    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    rules = "unmatched: refuse\nrules:\n  - match: '**'\n    access_roles: [{}]\n"
    before = parse_rules(rules.format("a"), "acl.yaml")
    after = parse_rules(rules.format("b"), "acl.yaml")
    settings = IndexSettings(
        casbin_db_url="sqlite:////nonexistent-folder/p.db", es_url="http://127.0.0.1:1"
    )
    now = {"rules": before}
    recorder = RulesEditRecorder(settings, "acme", before, lambda: now["rules"])
    now["rules"] = after
    assert recorder.said("rules", None) is None
    report = Report(knowledge_id="kb", source="/srv/share")
    report.documents_retagged = 2
    warning = recorder.said("re-listing", report)
    assert warning is not None and warning.startswith("规则变更没有记入权限历史："), warning
    assert "无法打开数据库文件" in warning and english_left(warning) == [], warning


RULES = {
    "fields": "unmatched: refuse\nrules:\n  - match: '**'\n    roles: [a]\n",
    "no-unmatched": "rules: []\n",
    "shadowed": "unmatched: refuse\nrules:\n  - match: '**'\n    access_roles: [a]\n"
    "  - match: 'x/**'\n    access_roles: [b]\n",
    "user-role": "unmatched: refuse\nrules:\n  - match: '**'\n    access_roles: [user:x]\n",
    "not-a-mapping": "- a\n",
}


@pytest.mark.parametrize("name", [*RULES, "not-utf8", "missing", "manifest"])
def test_a_rules_file_refused_or_warned_of_in_chinese(tmp_path: Path, name: str) -> None:
    """``--acl-rules`` refused (or a rule that can never match warned of) and a missing
    ``--manifest``: Chinese under zh, the rules' own words aside."""
    from typer.testing import CliRunner

    from indexer.cli import app as indexer

    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "a.md").write_text("# a\n", encoding="utf-8")
    rules = tmp_path / "acl.yaml"
    if name in RULES:
        rules.write_text(RULES[name], encoding="utf-8")
    if name == "not-utf8":
        rules.write_bytes(b"\xff\xfe")
    argv = ["index", "--knowledge-id", "kb", str(tmp_path / "share"), "--acl-rules", str(rules)]
    if name == "manifest":
        argv = [*argv[:4], "--manifest", str(tmp_path / "none.jsonl")]
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": "",
           "RSVC_ES_URL": "http://127.0.0.1:1"}  # fmt: skip
    done = CliRunner(env=env).invoke(indexer, argv)
    assert done.exit_code != 0, done.output
    if name == "manifest":  # (Typer's panel, its lines joined)
        said = " ".join(line.strip("│ ") for line in done.stderr.splitlines() if "│" in line)
    else:
        said = done.stderr.splitlines()[0]
        assert said.startswith("警告：" if name == "shadowed" else "错误："), said
    assert CJK.search(said), said
    assert english_left(said.replace("'", "`")) == [], said
    assert ": " not in re.sub(r"'[^']*'|（[^）]*）", "", said), said  # (English punctuation)
