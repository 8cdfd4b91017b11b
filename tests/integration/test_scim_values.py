"""A SCIM value no store holds is one refused resource (design.md §17), on SQLite and a real
PostgreSQL: a NUL in an e-mail, a lone surrogate in a name, a group named with a trailing
space — each write refused (400 ``invalidValue`` naming what), nothing stored for it, every
other user's write and ids untouched."""

from __future__ import annotations

from typing import Any

import pytest
from scim2_models import InvalidValueException
from scim2_server.utils import load_default_provider

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase
from retrieval_svc.scim.storage import TenantStorage, ensure_tables


@pytest.mark.parametrize(
    ("kind", "fields", "said"),
    [
        pytest.param("User", {"user_name": "li", "emails": [{"value": "li\x00@corp.example"}]},
                     "control character", id="nul-in-an-email"),
        pytest.param("User", {"user_name": "li", "external_id": "e-\x07"},
                     "control character", id="bell-in-externalId"),
        pytest.param("User", {"user_name": "li", "display_name": "Li \ud800"},
                     "lone surrogate", id="surrogate-in-a-name"),
        pytest.param("Group", {"display_name": "sales "}, "white space", id="group-space"),
    ],
)  # fmt: skip
def test_a_value_no_store_holds_refuses_that_resource_only(
    policy_db_url: str, kind: str, fields: dict[str, Any], said: str
) -> None:
    store = PolicyDatabase(DEFAULT_MODEL, policy_db_url)
    store.ensure()
    ensure_tables(store.engine())
    provider = load_default_provider()
    types = {rt.name: rt for rt in provider.resource_types}
    models = {name: provider.model_for(types[name]) for name in ("User", "Group")}
    storage = TenantStorage(store.engine(), provider, "acme", lambda: Actor("scim:t", "scim"))
    wang = storage.create(types["User"], models["User"](
        user_name="wang", emails=[{"value": "wang@corp.example"}]))  # fmt: skip
    storage.create(types["Group"], models["Group"](
        display_name="ops", members=[{"value": wang.id, "type": "User"}]))  # fmt: skip
    with pytest.raises(InvalidValueException) as refused:
        storage.create(types[kind], models[kind](**fields))
    assert said in str(refused.value.detail), refused.value.detail
    storage.create(types["User"], models["User"](user_name="zhao"))  # (the next one: stored)
    acl = AccessControl(source=store)
    assert acl.identify("WANG@corp.example", "acme").person == "wang"
    assert acl.identify("zhao", "acme").status == "known"
    assert acl.identify("li", "acme").status == "unknown"
    assert acl.user_roles("wang", "acme") == {"ops"}
