"""One owner model, every way in (design.md §17), on SQLite: each SCIM key is its own source, its
resources and grants its own; and, over random sequences of writes from every way in, a person
holds a role iff some live source gives it, directly or through the hierarchy."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scim2_models import InvalidValueException, SearchRequest
from scim2_server.utils import load_default_provider

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError, csv_line
from retrieval_svc.directory import Directory, Limits, planned
from retrieval_svc.directory.groups import mapping, normal_dn
from retrieval_svc.scim.storage import TenantStorage, ensure_tables


@functools.cache
def _provider() -> Any:
    return load_default_provider()  # (the same published schemas for every test: read once)


class Scim:
    """One tenant's SCIM endpoint as one key sees it."""

    def __init__(self, store: PolicyDatabase, key: str, tenant: str = "acme") -> None:
        provider = _provider()
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


def test_resources_stored_before_keys_kept_their_own_go_to_the_first_key(tmp_path: Path) -> None:
    store = PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'p.db'}")
    store.ensure()
    with store.engine().begin() as conn:  # (the table as it was: no client column)
        conn.execute(
            sa.text(
                "CREATE TABLE scim_resource (tenant VARCHAR(128) NOT NULL, id VARCHAR(64) NOT "
                "NULL, kind VARCHAR(64) NOT NULL, body TEXT, serial INTEGER NOT NULL, "
                "PRIMARY KEY (tenant, id))"
            )
        )
    ensure_tables(store.engine())
    okta = Scim(store, "okta")
    alice = okta.user("alice")
    with store.engine().begin() as conn:
        conn.execute(sa.text("UPDATE scim_resource SET client = NULL"))
    later, entra = Scim(store, "okta"), Scim(store, "entra")
    assert later.storage.get(later.types["User"], str(alice.id)).user_name == "alice"
    assert entra.storage.search([entra.types["User"]], SearchRequest()).total == 0
    entra.user("zed")  # (the legacy row stays okta's)
    assert Scim(store, "okta").storage.get(later.types["User"], str(alice.id))


def test_a_refusal_names_the_owner_in_the_administrator_s_language(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from retrieval_svc.acl import owned
    from retrieval_svc.cli import app
    from tests.unit.test_words import CJK, english_left

    store = fresh(tmp_path)
    PolicyAdmin(store)
    with store.engine().begin() as conn:
        owned.replace_in(conn, "acme", "hq", ["finance"])
    env = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "RSVC_LANG": ""}
    for argv in (["grant-role", "mallory", "finance"], ["inherit", "contractor", "finance"]):
        done = CliRunner(env=env).invoke(
            app, ["policy", "--db", store.url, *argv, "--tenant", "acme"]
        )
        said = done.output.strip()
        assert done.exit_code == 2 and "'hq'" in said and CJK.search(said), said
        assert english_left(said) == [], said
    assert roles_of(store, "mallory") == set()


# The property: random sequences of writes from every way in, against a model written here.

USERS = ("ann", "bo", "cy")
SYNCS: dict[str, dict[str, tuple[str, ...]]] = {  # sync → its groups → the roles they give
    "hq": {"fin": ("finance",), "ops": ("ops",)},
    "branch": {"fin-b": ("finance",)},  # (shares finance with hq)
}
KEYS = ("okta", "entra")
SCIM_ROLES = ("team", "finance")  # (a SCIM group named finance: refused once a sync owns it)
HAND_ROLES = ("visitor", "team", "finance")
RANK = {"contractor": 0, "visitor": 1, "team": 2, "finance": 3, "ops": 4}  # (no cycles)
Grant = tuple[str, str]


@dataclass
class Model:
    """The owner model in plain Python: who gives what, and so who holds what."""

    directory: dict[str, set[tuple[str, str]]] = field(
        default_factory=lambda: {s: set() for s in SYNCS}
    )
    synced: dict[str, set[Grant]] = field(default_factory=lambda: {s: set() for s in SYNCS})
    owned: set[str] = field(default_factory=set)
    scim: dict[str, set[Grant]] = field(default_factory=lambda: {k: set() for k in KEYS})
    hand: set[Grant] = field(default_factory=set)
    inherits: set[tuple[str, str]] = field(default_factory=set)

    def givers(self, grant: Grant) -> set[str]:
        found = {f"ldap:{s}" for s, gs in self.synced.items() if grant in gs}
        if grant[1] not in self.owned:  # (an owned role: only the directories give it)
            found |= {f"scim:{k}" for k, gs in self.scim.items() if grant in gs}
            found |= {"hand"} if grant in self.hand else set()
        return found

    def live_inherits(self) -> set[tuple[str, str]]:
        return {(c, p) for c, p in self.inherits if p not in self.owned}

    def roles(self, user: str) -> set[str]:
        held = {r for r in RANK if self.givers((user, r))}
        edges = self.live_inherits()
        while more := {p for c, p in edges if c in held} - held:
            held |= more
        return held

    def sync(self, name: str) -> None:
        groups = SYNCS[name]
        self.synced[name] = {(u, r) for u, g in self.directory[name] for r in groups[g]}
        self.owned |= {r for rs in groups.values() for r in rs}

    def others_give(self, grant: Grant) -> bool:
        return bool(self.givers(grant) - {"hand"})

    def apply(self, op: tuple[Any, ...]) -> None:
        kind, *args = op
        if kind == "member":
            name, user, group, present = args
            (self.directory[name].add if present else self.directory[name].discard)((user, group))
            self.sync(name)
        elif kind == "sync":
            self.sync(args[0])
        elif kind == "scim":
            key, user, role, present = args
            if not present:
                self.scim[key].discard((user, role))
            elif (user, role) not in self.scim[key] and role not in self.owned:
                self.scim[key].add((user, role))  # (else refused: nothing stored)
        elif kind == "scim-delete":
            key, user = args
            self.scim[key] = {g for g in self.scim[key] if g[0] != user}
        elif kind in ("grant", "import-add"):
            grant = tuple(args)
            if not self.givers(grant) and grant[1] not in self.owned:  # (else refused or so)
                self.hand.add(grant)  # type: ignore[arg-type]
        elif kind == "revoke":
            self.hand.discard(tuple(args))  # type: ignore[arg-type]
        elif kind in ("delete", "import-drop"):
            grant = tuple(args)
            if self.givers(grant) and not self.others_give(grant):  # type: ignore[arg-type]
                self.hand.discard(grant)  # type: ignore[arg-type]
        elif kind in ("inherit", "import-inherit"):
            if args[1] not in self.owned:
                self.inherits.add(tuple(args))  # type: ignore[arg-type]
        elif kind in ("disinherit", "delete-inherit"):
            self.inherits.discard(tuple(args))  # type: ignore[arg-type]


class Real:
    """The same writes, through the code every way in calls: ``planned`` and
    ``PolicyAdmin.sync`` as ``sync-ldap`` does, each SCIM key's storage, ``PolicyAdmin`` as the
    CLI and the console do."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store = fresh(folder)
        self.admin = PolicyAdmin(self.store)
        self.directory: dict[str, set[tuple[str, str]]] = {s: set() for s in SYNCS}
        self.keys = {k: Scim(self.store, k) for k in KEYS}
        self.users: dict[str, dict[str, Any]] = {k: {} for k in KEYS}
        self.groups: dict[str, dict[str, Any]] = {k: {} for k in KEYS}
        self.members: dict[str, dict[str, set[str]]] = {k: {} for k in KEYS}

    def sync(self, name: str) -> None:
        found = Directory()
        for user in USERS:
            found.users[normal_dn(f"uid={user},ou=people")] = user
        for group in SYNCS[name]:
            found.groups[normal_dn(f"cn={group},ou={name}")] = group
        for user, group in self.directory[name]:
            found.add_member(f"uid={user},ou=people", f"cn={group},ou={name}")
        admin = PolicyAdmin(self.store, Actor(name, "ldap"))
        made, _ = planned(admin, "acme", name, found, mapping(SYNCS[name]), Limits(force=True))
        admin.sync("sync-ldap", "acme", name, made.changes, made.owned, "", made.identities)

    def scim(self, key: str, user: str, role: str, present: bool) -> None:
        scim, users, members = self.keys[key], self.users[key], self.members[key]
        if user not in users:
            users[user] = scim.user(user)
        wanted = set(members.get(role, set()))
        (wanted.add if present else wanted.discard)(user)
        try:
            if role not in self.groups[key]:
                if not wanted:
                    return
                self.groups[key][role] = scim.group(role, *(users[u] for u in sorted(wanted)))
            else:
                scim.set_members(self.groups[key][role], *(users[u] for u in sorted(wanted)))
        except InvalidValueException:
            return  # (refused: nothing stored)
        members[role] = wanted

    def scim_delete(self, key: str, user: str) -> None:
        found = self.users[key].pop(user, None)
        if found is not None:
            scim = self.keys[key]
            scim.storage.delete(scim.types["User"], str(found.id))
            for held in self.members[key].values():
                held.discard(user)

    def row(self, member: str, role: str) -> int | None:
        with self.store.engine().connect() as conn:
            return conn.execute(
                sa.text(
                    "SELECT id FROM casbin_rule WHERE ptype = 'g' AND v0 = :m AND v1 = :r "
                    "AND v2 = 'acme'"
                ),
                {"m": member, "r": role},
            ).scalar()

    def imported(self, add: tuple[str, ...] = (), drop: tuple[str, ...] = ()) -> None:
        rows = [r for r in self.admin.rules() if r[1:] != drop]
        lines = [csv_line(r[0], r[1:]) for r in rows]
        if add:
            lines.append(csv_line("g", add))
        path = self.folder / "policy.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.admin.import_csv(path)

    def apply(self, op: tuple[Any, ...]) -> None:
        kind, *args = op
        try:
            if kind == "member":
                name, user, group, present = args
                (self.directory[name].add if present else self.directory[name].discard)(
                    (user, group)
                )
                self.sync(name)
            elif kind == "sync":
                self.sync(args[0])
            elif kind == "scim":
                self.scim(*args)
            elif kind == "scim-delete":
                self.scim_delete(*args)
            elif kind == "grant":
                self.admin.grant_role(args[0], args[1], "acme")
            elif kind == "revoke":
                self.admin.revoke_role(args[0], args[1], "acme")
            elif kind in ("delete", "delete-inherit"):
                member = f"user:{args[0]}" if kind == "delete" else args[0]
                if (row := self.row(member, args[1])) is not None:
                    self.admin.delete_row(row)
            elif kind == "import-add":
                self.imported(add=(f"user:{args[0]}", args[1], "acme"))
            elif kind == "import-inherit":
                self.imported(add=(args[0], args[1], "acme"))
            elif kind == "import-drop":
                self.imported(drop=(f"user:{args[0]}", args[1], "acme"))
            elif kind == "inherit":
                self.admin.inherit(args[0], args[1], "acme")
            elif kind == "disinherit":
                self.admin.disinherit(args[0], args[1], "acme")
        except PolicyError:
            pass  # (a refusal; the model says whether anything changed)

    def roles(self) -> dict[str, set[str]]:
        acl = AccessControl(source=self.store)
        return {user: set(acl.user_roles(user, "acme")) for user in USERS}


users = st.sampled_from(USERS)
inheritance = st.sampled_from(
    [(c, p) for c in RANK for p in RANK if RANK[c] < RANK[p] and c in ("contractor", "visitor")]
)
operations = st.one_of(
    st.tuples(
        st.just("member"),
        st.sampled_from(["hq"]),
        users,
        st.sampled_from(["fin", "ops"]),
        st.booleans(),
    ),
    st.tuples(st.just("member"), st.just("branch"), users, st.just("fin-b"), st.booleans()),
    st.tuples(st.just("sync"), st.sampled_from(sorted(SYNCS))),
    st.tuples(
        st.just("scim"), st.sampled_from(KEYS), users, st.sampled_from(SCIM_ROLES), st.booleans()
    ),
    st.tuples(st.just("scim-delete"), st.sampled_from(KEYS), users),
    st.tuples(
        st.sampled_from(["grant", "revoke", "delete", "import-add", "import-drop"]),
        users,
        st.sampled_from(HAND_ROLES),
    ),
    st.tuples(st.sampled_from(["delete", "revoke"]), users, st.sampled_from(["finance", "ops"])),
    st.tuples(
        st.sampled_from(["inherit", "import-inherit", "disinherit", "delete-inherit"]), inheritance
    ).map(lambda t: (t[0], *t[1])),
    st.tuples(st.just("grant"), users, st.just("contractor")),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(operations, min_size=1, max_size=14))
def test_a_person_holds_a_role_iff_some_live_source_gives_it(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(prefix="rsvc-owners-") as folder:
        real, model = Real(Path(folder)), Model()
        try:
            for done, op in enumerate(ops, 1):
                real.apply(op)
                model.apply(op)
                expected = {user: model.roles(user) for user in USERS}
                assert real.roles() == expected, ops[:done]
        finally:
            real.store.engine().dispose()
