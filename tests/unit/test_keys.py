"""API keys, the Authorization header and settings refusal (design.md §6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from retrieval_svc.auth.keys import ApiKeyConfig, KeyStore, bearer_token, hash_key
from retrieval_svc.errors import AuthorizationFailed, MalformedAuthorization
from retrieval_svc.settings import Settings


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "abc"]
)
def test_malformed_headers(header: str | None) -> None:
    with pytest.raises(MalformedAuthorization):
        bearer_token(header)


def test_bearer_is_case_insensitive() -> None:
    assert bearer_token("bearer  k1 ") == "k1"


def test_lookup_finds_the_matching_key_only() -> None:
    keys = [
        ApiKeyConfig(name="a", sha256=hash_key("secret-a-123")),
        ApiKeyConfig(name="b", sha256=hash_key("secret-b-123")),
    ]
    store = KeyStore(keys)
    assert store.lookup("secret-b-123").name == "b"
    with pytest.raises(AuthorizationFailed):
        store.lookup("secret-c-123")


@pytest.mark.parametrize("placeholder", ["changethis", "changeme", "secret", ""])
def test_placeholder_keys_are_refused(placeholder: str) -> None:
    with pytest.raises(ValidationError, match="placeholder"):
        ApiKeyConfig(name="x", sha256=hash_key(placeholder))


def test_kb_scope_patterns() -> None:
    key = ApiKeyConfig(name="x", sha256=hash_key("k-123456"), knowledge_ids=("ops-*", "faq"))
    assert key.may_read("ops-1") and key.may_read("faq")
    assert not key.may_read("finance") and not key.may_read("faq2")


def test_no_key_refuses_to_start() -> None:
    with pytest.raises(ValidationError, match="no API key is configured"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_auth_can_be_disabled_explicitly() -> None:
    assert Settings(_env_file=None, auth_disabled=True).auth_disabled  # type: ignore[call-arg]


def test_keys_file_json_and_yaml(tmp_path: Path) -> None:
    entry = {"name": "dify", "sha256": hash_key("k-123456"), "tenant": "acme"}
    (tmp_path / "keys.json").write_text(json.dumps([entry]))
    (tmp_path / "keys.yaml").write_text(
        f"keys:\n  - name: other\n    sha256: {hash_key('k2-1234')}\n"
    )
    s1 = Settings(_env_file=None, api_keys_file=tmp_path / "keys.json")  # type: ignore[call-arg]
    s2 = Settings(_env_file=None, api_keys_file=tmp_path / "keys.yaml")  # type: ignore[call-arg]
    assert [k.name for k in s1.api_keys] == ["dify"]
    assert [k.name for k in s2.api_keys] == ["other"]


def test_keys_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"name": "env", "sha256": hash_key("k-123456"), "mode": "fixed", "roles": ["r"]}
    monkeypatch.setenv("RSVC_API_KEYS", json.dumps([entry]))
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.api_keys[0].roles == ("r",)


def test_duplicate_key_names_refused() -> None:
    a = {"name": "a", "sha256": hash_key("k-123456")}
    with pytest.raises(ValidationError, match="unique"):
        Settings(_env_file=None, api_keys=[a, a])  # type: ignore[call-arg]


def test_configuration_errors_never_echo_secrets() -> None:
    with pytest.raises(ValidationError) as err:
        ApiKeyConfig(name="x", sha256=hash_key("k-123456"), token_secret="short-secret-value")
    assert "short-secret-value" not in str(err.value)
    with pytest.raises(ValidationError) as err2:
        Settings(_env_file=None, es_password=["not-a-string-secret"], auth_disabled=True)  # type: ignore[call-arg]
    assert "not-a-string-secret" not in str(err2.value)


def test_readyz_drops_a_keys_file_error_once_the_file_is_back_as_in_force(tmp_path: Path) -> None:
    """A bad edit is said in /readyz; the file restored to the content in force clears it,
    though nothing is reloaded (the keys in force never changed)."""
    from retrieval_svc.auth.key_file import KeyFile

    path = tmp_path / "keys.json"
    good = json.dumps([{"name": "dify", "sha256": hash_key("k" * 32), "tenant": "acme"}])
    path.write_text(good, encoding="utf-8")
    settings = Settings(_env_file=None, api_keys_file=path)  # type: ignore[call-arg]
    key_file = KeyFile(settings, KeyStore(settings.api_keys))
    path.write_text(good[:-3], encoding="utf-8")  # (an editor's half-saved file)
    assert key_file.check() is False
    assert key_file.view()["error"]
    path.write_text(good, encoding="utf-8")
    assert key_file.check() is False  # (the same keys: nothing to reload)
    assert key_file.view()["error"] is None, key_file.view()
