"""The service CLI: `new-key` makes every kind of key, and the service refuses to start with a
key that cannot work, naming it (issue #12)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.cli import app


def new_key(*args: str) -> tuple[ApiKeyConfig, str, str]:
    result = CliRunner(env={"RSVC_LANG": "en"}).invoke(app, ["new-key", "--name", "k", *args])
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout.strip().splitlines()[-1])
    shown = re.search(r"rsvc_[A-Za-z0-9_-]+", result.stderr)  # (in either language's line)
    assert shown is not None, result.stderr
    secret = shown.group(0)
    return ApiKeyConfig.model_validate(entry), secret, result.stderr


def test_signed_keys_get_a_strong_secret_once() -> None:
    key, secret, stderr = new_key("--mode", "signed", "--knowledge-ids", "building-*,faq")
    assert key.mode is IdentityMode.SIGNED and key.sha256 == hash_key(secret)
    assert key.token_secret is not None and len(key.token_secret.get_secret_value()) >= 48
    assert key.knowledge_ids == ("building-*", "faq")
    assert "token secret" in stderr
    other, _, _ = new_key("--mode", "signed")
    assert other.token_secret != key.token_secret


def test_roles_and_admin_work_for_every_mode() -> None:
    for mode in IdentityMode:
        key, _, _ = new_key("--mode", mode.value, "--roles", "巡检员，物业经理", "--admin")
        assert key.roles == ("巡检员", "物业经理") and key.admin


def test_a_key_for_dify_refuses_what_would_read_as_a_stranger() -> None:
    key, _, stderr = new_key("--for", "dify", "--user-id-shape", "email,uuid")
    assert (key.unknown_user, key.anonymous) == ("refuse", "refuse")
    assert key.user_id_shape == ("email", "uuid")
    assert "{{#sys.user_id#}}" in stderr
    plain, _, _ = new_key()
    assert (plain.unknown_user, plain.anonymous, plain.user_id_shape) == ("public", "public", ())
    pattern, _, _ = new_key("--user-id-shape", "regex:[a-z]{2,8}")  # (a comma inside is its own)
    assert pattern.user_id_shape == ("regex:[a-z]{2,8}",)
    result = CliRunner().invoke(app, ["new-key", "--name", "k", "--user-id-shape", "mail"])
    assert result.exit_code == 2 and "user_id_shape" in result.stderr


def test_a_fixed_key_without_roles_is_refused() -> None:
    result = CliRunner().invoke(
        app, ["new-key", "--name", "k", "--mode", "fixed"], env={"RSVC_LANG": "en"}
    )
    assert result.exit_code == 2 and "no roles" in result.stderr


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"mode": "signed"}, "'broken' has mode signed but no token_secret"),
        ({"mode": "fixed"}, "'broken' has mode fixed but no roles"),
        ({"mode": "oidc"}, "['broken'] have mode oidc: set RSVC_OIDC_ISSUER"),
    ],
)
def test_serve_refuses_a_key_that_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, str], says: str
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"name": "broken", "sha256": hash_key("x" * 20), **entry}]))
    monkeypatch.setenv("RSVC_API_KEYS_FILE", str(keys))
    result = CliRunner().invoke(app, ["serve", "--port", "1"], env={"RSVC_LANG": "en"})
    assert result.exit_code == 2
    assert says in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("command", [["stats"], ["index", ".", "--knowledge-id", "x"], ["init"]])
def test_an_unreachable_cluster_is_one_line_with_a_hint(command: list[str]) -> None:
    from indexer.cli import app as indexer_app
    from tests.support.fake_provider import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {"RSVC_ES_URL": url, "RSVC_EMBEDDER": "none", "RSVC_ES_TIMEOUT_S": "2"}
    result = CliRunner().invoke(indexer_app, command, env={**env, "RSVC_LANG": "en"})
    assert result.exit_code == 3, result.output
    said = result.stderr.strip().splitlines()
    # (a command that writes names its cluster first: the one line besides the error)
    lines = [line for line in said if not line.startswith(f"Elasticsearch at {url}: ")]
    assert len(lines) == 1 and url in lines[0] and "scripts/es.sh start" in lines[0]
    assert "Traceback" not in result.output
    debug = CliRunner().invoke(indexer_app, ["--debug", *command], env=env)
    assert debug.exit_code != 0 and debug.exception is not None  # the traceback, on request


def test_casbin_does_not_dump_its_policy_at_start(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from retrieval_svc.acl.casbin_acl import AccessControl

    caplog.set_level(logging.INFO)
    AccessControl()
    assert not [r for r in caplog.records if r.name.startswith("casbin")]


def test_the_indexer_summary_is_short_unbroken_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from indexer.cli import print_report
    from indexer.report import Report

    monkeypatch.setenv("RSVC_LANG", "en")  # (the English lines' widths, in any locale)

    report = Report(source="/very/long/" + "x" * 80, knowledge_id="kb", documents_seen=12345)
    report.documents_indexed, report.chunks_indexed, report.chunks_embedded = 12000, 98765, 98765
    print_report(report, as_json=False)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(len(line) <= 100 for line in lines)
    assert any("skipped 0 unchanged, 0 failed, 0 pruned" in line for line in lines)
    assert lines[0].startswith("indexed 12000 documents (98765 chunks, 98765 embedded)")


@pytest.mark.parametrize(
    ("host", "docs", "metrics"),
    [("127.0.0.1", True, "open"), ("localhost", True, "open"), ("0.0.0.0", False, "key")],
)
def test_docs_and_metrics_are_open_only_on_loopback_unless_set(
    host: str, docs: bool, metrics: str
) -> None:
    from retrieval_svc.settings import Settings

    settings = Settings(auth_disabled=True, host=host)
    assert (settings.api_docs, settings.metrics) == (docs, metrics)
    chosen = Settings(auth_disabled=True, host=host, api_docs=True, metrics="port")
    assert (chosen.api_docs, chosen.metrics) == (True, "port")


@pytest.mark.parametrize(
    ("command", "env", "variable"),
    [
        pytest.param("indexer stats", {"RSVC_ES_URL": "notaurl"}, "RSVC_ES_URL", id="indexer-es"),
        pytest.param(
            "svc serve", {"RSVC_ES_URL": "notaurl", "RSVC_AUTH_DISABLED": "true"}, "RSVC_ES_URL",
            id="serve-es",
        ),
        pytest.param(
            "svc serve", {"RSVC_ES_URL": "http://127.0.0.1", "RSVC_AUTH_DISABLED": "true"},
            "RSVC_ES_URL", id="serve-es-no-port",
        ),
        pytest.param(
            "svc policy list", {"RSVC_CASBIN_DB_URL": "foo"}, "RSVC_CASBIN_DB_URL", id="policy-db"
        ),
        pytest.param(
            "svc serve", {"RSVC_CASBIN_DB_URL": "foo", "RSVC_AUTH_DISABLED": "true"},
            "RSVC_CASBIN_DB_URL", id="serve-db",
        ),
        pytest.param(
            "indexer stats", {"RSVC_EMBEDDER": "openai", "RSVC_EMBEDDING_URL": "host:8000",
                              "RSVC_EMBEDDING_MODEL": "m"},
            "RSVC_EMBEDDING_URL", id="indexer-embedding",
        ),
        pytest.param(
            "svc serve", {"RSVC_PUBLIC_URL": "example.com", "RSVC_AUTH_DISABLED": "true"},
            "RSVC_PUBLIC_URL", id="serve-public-url",
        ),
    ],
)  # fmt: skip
def test_a_malformed_url_is_one_line_and_exit_2(
    command: str, env: dict[str, str], variable: str
) -> None:
    from indexer.cli import app as indexer_app

    program, *args = command.split()
    cli = indexer_app if program == "indexer" else app
    result = CliRunner().invoke(cli, args, env={**env, "RSVC_LANG": "en"})
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"configuration error: {variable}: "), line
    assert "Traceback" not in result.output
    said = CliRunner().invoke(cli, args, env={**env, "RSVC_LANG": "zh"})
    assert said.exit_code == 2 and said.output.startswith(f"配置错误：{variable}："), said.output


def test_audit_search_s_since_past_the_year_one_is_one_line() -> None:
    # Issue #36 §3: --since 99999999d ended in an OverflowError traceback.
    env = {"RSVC_ES_URL": "http://127.0.0.1:1", "RSVC_AUDIT": "elasticsearch", "RSVC_LANG": "en"}
    result = CliRunner().invoke(app, ["audit", "search", "--since", "99999999d"], env=env)
    assert result.exit_code == 2 and "before the year 1" in result.output, result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit
    )
