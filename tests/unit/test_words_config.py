"""A configuration error in a Chinese locale: a bad key file, a bad URL, a key entry that
cannot work, said in Chinese (the setting's name and a library's quoted detail aside); the
same errors under an English locale as before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.unit.test_words import CJK, english_left

PLACEHOLDER = hashlib.sha256(b"changeme").hexdigest()
REAL = hashlib.sha256(b"a real key").hexdigest()


def _cases(tmp: Path) -> dict[str, tuple[str, list[str], dict[str, str], str]]:
    """name → (program, argv, environment, what the English line begins with)."""
    files = {
        "placeholder.json": json.dumps([{"name": "k", "sha256": PLACEHOLDER}]),
        "signed.json": json.dumps([{"name": "k", "sha256": REAL, "mode": "signed"}]),
        "fixed.json": json.dumps([{"name": "k", "sha256": REAL, "mode": "fixed"}]),
        "role.json": json.dumps([{"name": "k", "sha256": REAL, "roles": ["user:x"]}]),
        "bad-entry.json": json.dumps([{"name": "dify", "sha256": "zz", "tenants": ["acme"]}]),
        "not-json.json": "not json\n",
        "not-yaml.yaml": "keys: [[[\n",
    }
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
    serve = ["serve", "--port", "1"]
    config = "configuration error: "
    cases = {
        name.split(".")[0]: ("svc", serve, {"RSVC_API_KEYS_FILE": str(tmp / name)}, config)
        for name in files
    }
    cases.update(
        {
            "no-keys-file": ("svc", serve, {"RSVC_API_KEYS_FILE": str(tmp / "none.json")}, config),
            "no-key": ("svc", serve, {}, config),
            "keys-not-json": ("svc", serve, {"RSVC_API_KEYS": "not json"}, config),
            "es-url": (
                "indexer",
                ["index", "--knowledge-id", "kb", str(tmp)],
                {"RSVC_ES_URL": "notaurl"},
                config,
            ),
            "es-port": (
                "indexer",
                ["index", "--knowledge-id", "kb", str(tmp)],
                {"RSVC_ES_URL": "http://x"},
                config,
            ),
            "db-url": ("svc", ["policy", "--db", "nodb", "allow", "a", "b"], {}, config),
            "new-key-fixed": ("svc", ["new-key", "--name", "k", "--mode", "fixed"], {}, "error: "),
            "new-key-role": ("svc", ["new-key", "--name", "k", "--roles", "user:x"], {}, "error: "),
            "new-key-scim": ("svc", ["new-key", "--name", "k", "--scim", "--admin"], {}, "error: "),
        }
    )
    return cases


NAMES = sorted([
    "placeholder", "signed", "fixed", "role", "not-json", "not-yaml", "no-keys-file", "no-key",
    "keys-not-json", "es-url", "es-port", "db-url", "new-key-fixed", "new-key-role",
    "new-key-scim",
])  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_a_configuration_error_is_said_in_chinese(tmp_path: Path, name: str) -> None:
    from typer.testing import CliRunner

    from indexer.cli import app as indexer
    from retrieval_svc.cli import app as svc

    which, argv, extra, english = _cases(tmp_path)[name]
    program = indexer if which == "indexer" else svc
    env: dict[str, str | None] = {
           "LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": "",
           "RSVC_API_KEYS": None, "RSVC_API_KEYS_FILE": None, "RSVC_AUTH_DISABLED": None,
           "RSVC_ES_URL": "http://127.0.0.1:1", **extra}  # fmt: skip
    done = CliRunner(env=env).invoke(program, argv)
    assert done.exit_code == 2, done.output
    said = done.stderr.strip()
    assert said.startswith(("配置错误：", "错误：")) and CJK.search(said), said
    assert english_left(said.replace("'", "`")) == [], said
    assert "Traceback" not in done.output
    plain = CliRunner(env={**env, "LANG": "C.UTF-8"}).invoke(program, argv)
    assert plain.exit_code == 2 and plain.stderr.startswith(english), plain.output


def test_a_refused_entry_of_the_keys_file_is_named_by_its_file_and_place(tmp_path: Path) -> None:
    """Not as a setting of the service's own (it said ``RSVC_SHA256: …``, a variable nobody
    can set): the file, the entry's number and name, each field it refuses."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app

    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": "ok", "sha256": REAL}, {"name": "dify", "sha256": "zz"}]))
    env = {"RSVC_LANG": None, "LC_ALL": None, "LC_MESSAGES": None, "RSVC_API_KEYS": None,
           "RSVC_API_KEYS_FILE": str(path), "RSVC_ES_URL": "http://127.0.0.1:1"}  # fmt: skip
    for lang, entry in (("C.UTF-8", "entry 2 (dify): sha256:"), ("zh_CN.UTF-8", "第 2 个条目")):
        done = CliRunner(env={**env, "LANG": lang}).invoke(app, ["serve", "--port", "1"])
        assert done.exit_code == 2, done.output
        assert entry in done.stderr and str(path) in done.stderr, done.stderr
        assert "RSVC_SHA256" not in done.stderr, done.stderr
