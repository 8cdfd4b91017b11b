"""Where people's SIDs live (retrieval_svc.acl.directory_sids): one row a person and sync,
read into the policy in force, replaced only by the sync that wrote it; the one function that
says which SIDs a tenant's directory knows. SQLite, no server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_svc.acl import directory_sids
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.directory_sids import decode, encode
from retrieval_svc.acl.known_sids import known_sids
from retrieval_svc.acl.policy_index import PolicyIndex, index_of
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase

DOMAIN = "S-1-5-21-1965625592-1857721792-3928199354"

sids = st.builds(
    lambda prefix, rid: f"{prefix}-{rid}",
    st.sampled_from([DOMAIN, "S-1-5-21-1-2-3", "S-1-5-32", "S-1-1", "S-1-5"]),
    st.integers(0, 2**32 - 1),
)


@given(st.frozensets(sids, max_size=40))
def test_a_set_of_sids_encodes_and_decodes_to_itself(held: frozenset[str]) -> None:
    assert decode(encode(held)) == held
    assert encode(held) == encode(sorted(held, reverse=True))  # (equal sets, equal texts)


def test_joined_texts_decode_to_their_union_and_garbage_to_nothing() -> None:
    a, b = encode([f"{DOMAIN}-513"]), encode(["S-1-1-0", f"{DOMAIN}-1104"])
    assert decode(f"{a};{b}") == {f"{DOMAIN}-513", "S-1-1-0", f"{DOMAIN}-1104"}
    assert decode("garbage;x:1;S-1-5:abc") == frozenset()


@pytest.fixture
def store(tmp_path: Path) -> PolicyDatabase:
    store = PolicyDatabase(DEFAULT_MODEL, f"sqlite:///{tmp_path / 'policy.db'}")
    store.ensure()
    return store


def _replace(store: PolicyDatabase, source: str, people: dict[str, set[str]], known: set[str]):
    with store.engine().begin() as conn:
        return directory_sids.replace_in(conn, "acme", source, people, known)


def test_one_row_a_person_read_into_the_policy_and_a_change_moves_the_stamp(
    store: PolicyDatabase,
) -> None:
    many = {f"{DOMAIN}-{1000 + i}" for i in range(200)}
    people = {f"user:u{i}": many | {f"{DOMAIN}-{5000 + i}"} for i in range(50)}
    assert _replace(store, "ldap:hq", people, many | {f"{DOMAIN}-9999"}) == (50, 0)
    with store.engine().connect() as conn:
        assert len(directory_sids.rows_in(conn, "acme", "ldap:hq")) == 51  # (50 + KNOWN)
    acl = AccessControl(source=store)
    assert acl.user_roles("u7", "acme") == {f"sid:{s}" for s in people["user:u7"]}
    assert acl.person_roles("u7", "acme") >= {"sid:S-1-1-0", f"sid:{DOMAIN}-5007"}
    assert acl.user_roles("u7", "other") == frozenset()
    assert acl.identify("u7", "acme").person == "u7"  # (holding SIDs makes a person known)
    assert known_sids(store.url, "acme").synced == many | {f"{DOMAIN}-9999"}  # (as the sync read)
    # Unchanged: nothing written, the stamp stays; one person changed: the stamp moves.
    stamp = store.stamp()
    assert _replace(store, "ldap:hq", people, many | {f"{DOMAIN}-9999"}) == (0, 0)
    assert store.stamp() == stamp
    people["user:u7"] = {f"{DOMAIN}-513"}
    assert _replace(store, "ldap:hq", people, many | {f"{DOMAIN}-9999"}) == (1, 0)
    assert store.stamp() != stamp
    assert acl.reload_if_changed()
    assert acl.user_roles("u7", "acme") == {f"sid:{DOMAIN}-513"}


def test_a_person_out_of_a_group_and_back_in_moves_the_stamp_each_time(
    store: PolicyDatabase,
) -> None:
    """The row rewritten in each sync: removed from a group, then added back — the second
    write must not reuse the generation the first one's row had (the stamp would come back
    unchanged and the service keep the narrowed SIDs), nor may a person gone and back."""
    group, known = f"{DOMAIN}-1114", {f"{DOMAIN}-513", f"{DOMAIN}-1114", f"{DOMAIN}-1107"}
    ann, bob = {f"{DOMAIN}-513", group}, {f"{DOMAIN}-513", f"{DOMAIN}-1107"}
    acl = AccessControl(source=store)
    stamps = []
    for people in (
        {"user:ann": ann, "user:bob": bob},
        {"user:ann": ann - {group}, "user:bob": bob},  # (ann out of the group)
        {"user:ann": ann, "user:bob": bob},  # (and back in)
        {"user:ann": ann},  # (bob gone)
        {"user:ann": ann, "user:bob": bob | {group}},  # (and back, in one more group)
    ):
        _replace(store, "ldap:hq", people, known)
        stamps.append(store.stamp())
        assert acl.reload_if_changed() or len(stamps) == 1
        for subject, held in people.items():
            assert acl.user_roles(subject[5:], "acme") == {f"sid:{s}" for s in held}
    assert len(set(stamps)) == len(stamps), stamps
    with store.engine().begin() as conn:  # (a rename that moves rows moves the stamp too)
        directory_sids.rename_in(conn, "acme", "ldap:hq", "ldap:east")
    assert store.stamp() not in stamps


def test_a_sync_replaces_only_its_own_rows_and_a_person_holds_both(
    store: PolicyDatabase,
) -> None:
    _replace(store, "ldap:hq", {"user:ann": {f"{DOMAIN}-1104"}}, {f"{DOMAIN}-1104"})
    _replace(store, "ldap:branch", {"user:ann": {"S-1-5-21-1-2-3-7"}}, {"S-1-5-21-1-2-3-7"})
    acl = AccessControl(source=store)
    assert acl.user_roles("ann", "acme") == {f"sid:{DOMAIN}-1104", "sid:S-1-5-21-1-2-3-7"}
    assert _replace(store, "ldap:hq", {}, set()) == (0, 1)  # (hq: ann left)
    assert acl.reload_if_changed()
    assert acl.user_roles("ann", "acme") == {"sid:S-1-5-21-1-2-3-7"}
    assert known_sids(store.url, "acme").synced == {"S-1-5-21-1-2-3-7"}
    with store.engine().begin() as conn:  # (a renamed sync takes its old name's rows over)
        directory_sids.rename_in(conn, "acme", "ldap:branch", "ldap:east")
        assert directory_sids.rows_in(conn, "acme", "ldap:branch") == {}
        assert set(directory_sids.rows_in(conn, "acme", "ldap:east")) == {"user:ann", "*"}


def test_the_index_hands_sids_between_processes_in_pieces(store: PolicyDatabase) -> None:
    people = {f"user:u{i}": {f"{DOMAIN}-{i}", f"{DOMAIN}-513"} for i in range(4500)}
    _replace(store, "ldap:hq", people, set().union(*people.values()))
    index = index_of(store)
    again = asyncio.run(PolicyIndex.assemble(index.pieces()))
    assert again.sids == index.sids and len(again.sids["acme"]) == 4500
    assert again.sid_roles("user:u4499", "acme") == {f"sid:{DOMAIN}-4499", f"sid:{DOMAIN}-513"}
