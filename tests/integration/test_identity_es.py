"""The right person asks (design.md §17): a user arriving with their directory uid, their
e-mail in any case, another directory attribute, or a Dify end-user id mapped by hand sees
exactly what their directory groups allow; an id that names no one is never silent — marked in
the log line, the audit event, the metric and /v1/explain — and refused where the key says so.
Against the suite's slapd, the policy in a database, and the real Elasticsearch."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ldap3
import pytest
from typer.testing import CliRunner

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.cli import app as svc_cli
from tests.integration.test_directory_ldap import ADMIN, Tree
from tests.integration.test_permissions_es import POWER, QUERY, cond, dify_body
from tests.support import app_client, make_settings, metric_sample
from tests.support.corpus import SAMPLES_KB

pytestmark = [pytest.mark.anyio, pytest.mark.english_lines]

KEY, STRICT, EXPLAIN = "id-key-public-0123456789", "id-key-strict-0123456789", "id-admin-0123456"
DIFY_UUID = "3f6c1a9e-5b2d-4c1e-9a7f-0d2b8e6f4a11"


@pytest.fixture
def tree(ldap_server: str) -> Iterator[Tree]:
    made = Tree(ldap_server)
    yield made
    made.conn.unbind()


def person(tree: Tree, uid: str, mail: str, number: str) -> str:
    dn = f"uid={uid},{tree.people}"
    tree.conn.add(
        dn, "inetOrgPerson", {"cn": uid, "sn": uid, "mail": mail, "employeeNumber": number}
    )
    return dn


def policy(db: str, *args: str) -> Any:
    return CliRunner().invoke(
        svc_cli, ["policy", "--db", db, *args], env={"TEST_LDAP_PASSWORD": ADMIN[1]}
    )


def keys() -> list[ApiKeyConfig]:
    common: dict[str, Any] = {"tenant": "acme", "mode": IdentityMode.CASBIN}
    return [
        ApiKeyConfig(name="dify", sha256=hash_key(KEY), **common),
        ApiKeyConfig(name="strict", sha256=hash_key(STRICT), unknown_user="refuse", **common),
        ApiKeyConfig(name="admin", sha256=hash_key(EXPLAIN), tenant="acme", admin=True),
    ]


async def test_every_id_a_person_arrives_with_resolves_and_an_unknown_one_is_marked(
    tree: Tree,
    policy_db_url: str,
    corpus: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = policy_db_url
    wang = person(tree, "wang", "Wang.Li@Corp.example", "E-1001")
    zhao = person(tree, "zhao", "desk@corp.example", "E-1002")
    person(tree, "chen", "desk@corp.example", "E-1003")  # (a shared mailbox: two people)
    tree.group("ops", wang)
    tree.group("cleaning", zhao)
    sync = tree.sync_file(
        tmp_path,
        users={"base": tree.people, "aliases": ["mail", "employeeNumber"]},
        roles={"ops": ["运维工程师"]},
    )
    assert policy(db, "allow", "anyone", "*", "--tenant", "acme").exit_code == 0
    synced = policy(db, "sync-ldap", str(sync))
    assert synced.exit_code == 0 and "ids people are known by: +" in synced.stdout, synced.output
    mapping = tmp_path / "dify-users.csv"
    mapping.write_text(f"id,person\n{DIFY_UUID},wang\n", encoding="utf-8")
    mapped = CliRunner().invoke(svc_cli, ["identity", "--db", db, "map", "import", str(mapping),
                                          "--tenant", "acme"])  # fmt: skip
    assert mapped.exit_code == 0 and "+1 -0" in mapped.stdout, mapped.output
    settings = make_settings(
        corpus, api_keys=keys(), casbin_db_url=db, policy_check_interval_s=0, audit="log"
    )

    async def sees(user: str, key: str = KEY) -> tuple[int, set[str]]:
        body = dify_body(QUERY, cond("user_id", user, "is"))
        resp = await client.post(
            "/retrieval", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        return resp.status_code, {r["title"] for r in resp.json().get("records", [])}

    caplog.set_level(logging.INFO)
    async with app_client(settings) as client:
        for asked in ("wang", "WANG.LI@corp.example", "e-1001", DIFY_UUID):
            status, titles = await sees(asked)
            assert status == 200 and POWER in titles, asked  # 运维工程师 through ops
        # An id nobody has, and one two people share: public passages only, and said so.
        for asked, how in (
            ("stranger@corp.example", "unknown"),
            ("desk@corp.example", "ambiguous"),
        ):
            status, titles = await sees(asked)
            assert status == 200 and POWER not in titles and titles, asked
            labels = {"key": "dify", "status": how}
            assert metric_sample(client, "rsvc_unknown_principals_total", labels) == 1
        fields = [getattr(r, "fields", {}) for r in caplog.records]
        audited = [f for f in fields if f.get("event") == "retrieval"]
        assert [f["identity"] for f in audited][-2:] == ["unknown", "ambiguous"]
        assert [f["identity"] for f in audited][:4] == ["known", "alias", "alias", "alias"]
        assert any(f.get("identity") == "unknown" and "status" in f for f in fields)  # access log
        # The strict key refuses them, naming the id.
        status, _ = await sees("stranger@corp.example", STRICT)
        assert status == 403
        status, titles = await sees("wang", STRICT)
        assert status == 200 and POWER in titles
        explained = await client.post(
            "/v1/explain",
            json={"principal": {"user_id": "Wang.Li@corp.example"}, "document_id": "-"},
            headers={"Authorization": f"Bearer {EXPLAIN}"},
        )
        identity = explained.json()["principal"]["identity"]
        assert identity["status"] == "alias" and identity["person"] == "wang", identity
        assert "mail (ldap:sync-ldap)" == identity["via"]
        state = client._transport.app.state.rsvc  # type: ignore[attr-defined]
        seen = {(s.asked, s.status, s.key) for s in state.unknown_users.recent("acme")}
        assert seen == {
            ("stranger@corp.example", "unknown", "dify"),
            ("desk@corp.example", "ambiguous", "dify"),
            ("stranger@corp.example", "unknown", "strict"),
        }
        # The directory drops wang's e-mail: at the next sync it stops resolving.
        tree.conn.modify(wang, {"mail": [(ldap3.MODIFY_DELETE, [])]})
        assert policy(db, "sync-ldap", str(sync)).exit_code == 0
        state.acl.reload_if_changed()
        status, titles = await sees("wang.li@corp.example")
        assert status == 200 and POWER not in titles
        assert (await sees("E-1001"))[1] >= {POWER}
    resolved = CliRunner().invoke(svc_cli, ["identity", "--db", db, "resolve", "E-1001",
                                            "--tenant", "acme"])  # fmt: skip
    assert resolved.exit_code == 0 and resolved.stdout.startswith("alias: wang via employeeNumber")
    history = CliRunner().invoke(svc_cli, ["audit", "policy", "--db", db, "--json"]).stdout
    events = [json.loads(line) for line in history.splitlines()]
    (mapped_event,) = [e for e in events if e["action"] == "identity-map"]
    assert f"+ {DIFY_UUID} → wang" in mapped_event["detail"]


async def test_with_id_attribute_mail_look_alikes_of_an_address_are_no_one(
    tree: Tree, policy_db_url: str, corpus: str, tmp_path: Path
) -> None:
    # The own id read from mail is an e-mail address: its domain compared in IDNA2008, its
    # local part but for ASCII case — never folded as a directory attribute would be.
    ceo = f"uid=ceo,{tree.people}"
    tree.conn.add(ceo, "inetOrgPerson", {"cn": "ceo", "sn": "ceo", "mail": "ceo@fass.example"})
    tree.group("ops", ceo)
    sync = tree.sync_file(tmp_path, users={"base": tree.people, "id_attribute": "mail"},
                          roles={"ops": ["运维工程师"]})  # fmt: skip
    assert policy(policy_db_url, "allow", "anyone", "*", "--tenant", "acme").exit_code == 0
    assert policy(policy_db_url, "sync-ldap", str(sync)).exit_code == 0
    settings = make_settings(corpus, api_keys=keys(), casbin_db_url=policy_db_url,
                             policy_check_interval_s=0)  # fmt: skip
    fullwidth = "\uff43\uff45\uff4f@fass.example"
    async with app_client(settings) as client:

        async def sees(user: str) -> set[str]:
            native = {"query": QUERY, "knowledge_ids": [SAMPLES_KB], "top_k": 10,
                      "principal": {"user_id": user}}  # fmt: skip
            resp = await client.post(
                "/v1/search", json=native, headers={"Authorization": f"Bearer {KEY}"}
            )
            assert resp.status_code == 200, resp.text
            return {c["document_title"] for c in resp.json()["chunk_metadata"]}

        assert POWER in await sees("ceo@fass.example")
        assert POWER in await sees("CEO@FASS.example")
        for asked in ("ceo@faß.example", "ceo@FAẞ.example", fullwidth):
            seen = await sees(asked)
            assert POWER not in seen and seen, asked  # (public passages only)
