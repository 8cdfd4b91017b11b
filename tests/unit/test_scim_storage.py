"""SCIM storage across workers (issue #35 §3): what one worker writes, another serves — created,
changed and deleted resources taken in incrementally — and the grants follow."""

from __future__ import annotations

from pathlib import Path

from scim2_models import SearchRequest
from scim2_server.utils import load_default_provider

from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.scim.storage import TenantStorage, ensure_tables


def test_two_workers_see_each_others_writes_and_the_grants_follow(tmp_path: Path) -> None:
    store = PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}")
    store.ensure()
    ensure_tables(store.engine())
    provider = load_default_provider()
    types = {rt.name: rt for rt in provider.resource_types}
    user_model = provider.model_for(types["User"])
    group_model = provider.model_for(types["Group"])
    assert user_model is not None and group_model is not None
    actor = Actor("scim:test", "scim")
    a, b = (TenantStorage(store.engine(), provider, "acme", lambda: actor) for _ in range(2))
    wang = a.create(types["User"], user_model(user_name="wang"))
    ops = b.create(
        types["Group"],
        group_model(display_name="运维工程师", members=[{"value": wang.id, "type": "User"}]),
    )
    grouping = store.rules().grouping
    assert ["user:wang", "运维工程师", "acme"] in [list(g) for g in grouping]
    # a takes in b's group (incrementally), then renames the group: the grant moves.
    found = a.get(types["Group"], str(ops.id))
    found.display_name = "巡检员"
    a.update(types["Group"], found)
    grouping = store.rules().grouping
    assert [list(g) for g in grouping] == [["user:wang", "巡检员", "acme"]]
    # b deletes the user a made: a no longer finds it, and the grant is gone.
    b.delete(types["User"], str(wang.id))
    page = a.search([types["User"]], SearchRequest())
    assert page.total == 0
    assert store.rules().grouping == []
    events = store.history(since=found.meta.created.replace(year=2000), tenant="acme")  # type: ignore[union-attr]
    assert [e.action for e in events][:3] == ["delete User", "update Group", "create Group"]


def test_a_tenants_mapping_decides_which_groups_give_which_roles(tmp_path: Path) -> None:
    store = PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}")
    store.ensure()
    ensure_tables(store.engine())
    provider = load_default_provider()
    types = {rt.name: rt for rt in provider.resource_types}
    user_model, group_model = (provider.model_for(types[n]) for n in ("User", "Group"))
    assert user_model is not None and group_model is not None
    mapped = {"Finance Team": ("finance", "财务专员")}
    storage = TenantStorage(
        store.engine(), provider, "acme", lambda: Actor("scim:t", "scim"), mapped
    )
    li = storage.create(types["User"], user_model(user_name="li"))
    for name in ("Finance Team", "All Staff"):  # the second is not mapped: it gives nothing
        storage.create(
            types["Group"],
            group_model(display_name=name, members=[{"value": li.id, "type": "User"}]),
        )
    assert sorted(tuple(g) for g in store.rules().grouping) == [
        ("user:li", "finance", "acme"),
        ("user:li", "财务专员", "acme"),
    ]
