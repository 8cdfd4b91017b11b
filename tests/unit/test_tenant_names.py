"""Tenant names are names, never patterns (issue #36 §2; design.md §4, §13).

The console writes a tenant as the Casbin domain, so a tenant named ``acme*`` or ``*`` once
granted its own rules to every tenant its name matched. Every place a tenant name enters
refuses anything but a plain name, and the policy matches tenants by equality (``*`` alone
is the policy's "every tenant", which no tenant can be named).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from indexer.cli import app as indexer_app
from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.cli import app
from retrieval_svc.key_entry import ApiKeyConfig
from retrieval_svc.settings import Settings
from retrieval_svc.tenancy import check_tenant, tenant_of_slug, tenant_slug

BAD = ["acme*", "*", "a?c", "a,b", "a b", "user:x", "a/b", 'a"b', "-lead", ".hidden", "a\nb", "%"]
GOOD = ["acme", "acme-corp", "Acme_2", "t.1", "物业公司", "default"]


@pytest.mark.parametrize("name", BAD)
def test_a_pattern_or_odd_character_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"plain name|empty"):
        check_tenant(name)


@pytest.mark.parametrize("name", GOOD)
def test_plain_names_stay_and_round_trip(name: str) -> None:
    assert check_tenant(name) == name and tenant_of_slug(tenant_slug(name)) == name


@pytest.mark.parametrize("name", ["acme*", "*"])
def test_a_key_entry_and_the_settings_refuse_it(name: str) -> None:
    with pytest.raises(ValidationError, match="plain name"):
        ApiKeyConfig(name="k", sha256="0" * 64, tenant=name)
    with pytest.raises(ValidationError, match="plain name"):
        Settings(_env_file=None, auth_disabled=True, mcp_tenant=name)  # type: ignore[call-arg]


@pytest.mark.parametrize(("lang", "said"), [("en", "plain name"), ("zh", "普通名称")])
def test_new_key_and_the_indexer_refuse_it_in_one_line(
    tmp_path: Path, lang: str, said: str
) -> None:
    """In the reader's language, whole (a Chinese terminal shows no English sentence)."""
    env = {"RSVC_ES_URL": "http://127.0.0.1:1", "RSVC_LANG": lang, "COLUMNS": "300"}
    made = CliRunner().invoke(app, ["new-key", "--name", "k", "--tenant", "acme*"], env=env)
    assert made.exit_code == 2 and said in made.stderr, made.output
    results = [made]
    for command in (
        ["index", str(tmp_path), "--knowledge-id", "kb", "--tenant", "acme*"],
        ["delete", "--knowledge-id", "kb", "--tenant", "*"],
    ):
        result = CliRunner().invoke(indexer_app, command, env=env)
        assert result.exit_code == 2 and said in result.output, (command, result.output)
        results.append(result)
    audit = CliRunner().invoke(
        app, ["audit", "search", "--user", "li", "--tenant", "acme*"], env=env
    )
    assert audit.exit_code == 2 and said in audit.output, audit.output
    if lang == "zh":
        for result in [*results, audit]:
            (line,) = [line for line in result.output.splitlines() if said in line]
            assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{2,}", line), line


def test_a_policy_line_with_a_pattern_tenant_is_refused(tmp_path: Path) -> None:
    for line in ("p, anyone, acme*, *, read", "g, user:a, r, *", "g, user:a, r, ac?me"):
        path = tmp_path / "policy.csv"
        path.write_text(line + "\n", encoding="utf-8")
        acl = AccessControl(DEFAULT_MODEL, path)  # skipped, never read as a pattern
        (skipped,) = acl.skipped
        assert "tenants match exactly" in skipped.reason
        assert not acl.kb_decision(tenant="acme", user_id=None, roles=(), knowledge_id="x").allowed
        assert acl.user_roles("a", "acme") == set()


def test_tenants_match_exactly_and_star_alone_means_every_tenant(tmp_path: Path) -> None:
    path = tmp_path / "policy.csv"
    path.write_text(
        "p, anyone, acme, ops, read\np, anyone, *, handbook, read\n"
        "p, anyone, acme-corp, corp-only, read\n",
        encoding="utf-8",
    )
    acl = AccessControl(DEFAULT_MODEL, path)

    def may(tenant: str, kb: str) -> bool:
        return acl.kb_decision(tenant=tenant, user_id=None, roles=(), knowledge_id=kb).allowed

    assert may("acme", "ops") and not may("acme2", "ops") and not may("acm", "ops")
    assert may("acme", "handbook") and may("globex", "handbook")
    assert may("acme-corp", "corp-only") and not may("acme", "corp-only")


def test_the_policy_cli_and_admin_refuse_a_pattern_tenant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'policy.db'}"
    admin = PolicyAdmin(PolicyDatabase(DEFAULT_MODEL, url))
    for change in (
        lambda: admin.grant_role("li", "巡检员", "acme*"),
        lambda: admin.inherit("物业经理", "巡检员", "*"),
        lambda: admin.allow("anyone", "*", "acme*"),
        lambda: admin.rules("a*"),
    ):
        with pytest.raises(PolicyError, match="plain name"):
            change()
    assert admin.allow("anyone", "handbook", "*")  # the global rule, as the policy file has it
    assert admin.allow("anyone", "*", "acme")
    for args in (
        ["grant-role", "li", "巡检员", "--tenant", "acme*"],
        ["allow", "anyone", "*", "--tenant", "ac?me"],
    ):
        result = CliRunner().invoke(app, ["policy", "--db", url, *args], env={"RSVC_LANG": "en"})
        assert result.exit_code != 0 and "plain name" in result.output, (args, result.output)
        said = CliRunner().invoke(app, ["policy", "--db", url, *args], env={"RSVC_LANG": "zh"})
        assert said.exit_code != 0 and "普通名称" in said.output and "精确匹配" in said.output
        assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{2,}", said.output), said.output
    assert {r[2] for r in admin.rules() if r[0] == "p"} == {"*", "acme"}
    exported = admin.export_csv()
    bad = tmp_path / "bad.csv"
    bad.write_text(exported + "p, anyone, acme*, *, read\n", encoding="utf-8")
    with pytest.raises(PolicyError, match="tenants match exactly"):
        admin.import_csv(bad)
    assert admin.export_csv() == exported  # nothing changed
