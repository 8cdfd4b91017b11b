"""One owner model, every way in (design.md §17), on SQLite: each SCIM key is its own source, its
resources and grants its own; and, over random sequences of writes from every way in, a person
holds a role iff some live source gives it, directly or through the hierarchy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from scim2_server.utils import load_default_provider

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.scim.storage import TenantStorage, ensure_tables


class Scim:
    """One tenant's SCIM endpoint as one key sees it."""

    def __init__(self, store: PolicyDatabase, key: str, tenant: str = "acme") -> None:
        provider = load_default_provider()
        self.types = {rt.name: rt for rt in provider.resource_types}
        self.user_model = provider.model_for(self.types["User"])
        self.group_model = provider.model_for(self.types["Group"])
        actor = Actor(f"scim:{key}", "scim")
        self.storage = TenantStorage(store.engine(), provider, tenant, lambda: actor)

    def user(self, name: str) -> Any:
        assert self.user_model is not None
        return self.storage.create(self.types["User"], self.user_model(user_name=name))

    def group(self, name: str, *members: Any) -> Any:
        assert self.group_model is not None
        body = [{"value": m.id, "type": "User"} for m in members]
        return self.storage.create(
            self.types["Group"], self.group_model(display_name=name, members=body)
        )

    def set_members(self, group: Any, *members: Any) -> Any:
        found = self.storage.get(self.types["Group"], str(group.id))
        found.members = [{"value": m.id, "type": "User"} for m in members] or None
        return self.storage.update(self.types["Group"], found)


def fresh(tmp_path: Path) -> PolicyDatabase:
    store = PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}")
    store.ensure()
    ensure_tables(store.engine())
    return store


def sources(store: PolicyDatabase, member: str, role: str) -> set[str]:
    with store.engine().connect() as conn:
        rows = conn.execute(
            sa.text("SELECT source FROM grant_source WHERE member = :m AND role = :r"),
            {"m": member, "r": role},
        )
        return {row[0] for row in rows}


def roles_of(store: PolicyDatabase, user: str) -> set[str]:
    return set(AccessControl(source=store).user_roles(user, "acme"))


def test_two_scim_keys_of_one_tenant_keep_their_own_grants(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    okta, entra = Scim(store, "okta"), Scim(store, "entra")
    alice = okta.user("alice")
    fin = okta.group("fin", alice)
    entra.user("zed")  # (an unrelated user: entra's write re-records nothing of okta's)
    assert sources(store, "user:alice", "fin") == {"scim:okta"}
    okta.set_members(fin)  # okta removes alice from fin: okta's grant goes
    assert roles_of(store, "alice") == set()
    assert sources(store, "user:alice", "fin") == set()


def test_a_person_holds_a_role_while_any_scim_key_gives_it(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    okta, entra = Scim(store, "okta"), Scim(store, "entra")
    fin_okta = okta.group("fin", okta.user("alice"))
    fin_entra = entra.group("fin", entra.user("alice"))  # (each key's own alice and group)
    assert sources(store, "user:alice", "fin") == {"scim:okta", "scim:entra"}
    okta.set_members(fin_okta)
    assert roles_of(store, "alice") == {"fin"}  # (entra still gives it)
    admin = PolicyAdmin(store)
    try:
        admin.revoke_role("alice", "fin", "acme")
        raise AssertionError("a hand revoke of what a SCIM key gives must be refused")
    except PolicyError as exc:
        assert "scim:entra" in str(exc) and "scim:okta" not in str(exc)
    entra.set_members(fin_entra)
    assert roles_of(store, "alice") == set()
    # Each key sees only its own resources.
    assert {u.user_name for u in okta.storage.resources if hasattr(u, "user_name")} == {"alice"}
