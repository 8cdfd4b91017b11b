"""Windows SIDs as roles (retrieval_svc.acl.sids): binary and text forms, one spelling, and no
caller or hand grant able to spell one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_svc.acl.admin import checked_role
from retrieval_svc.acl.policy_store import PolicyError
from retrieval_svc.acl.sids import (
    PERSON_ROLES,
    parse_sid,
    role_sid,
    sid_from_bytes,
    sid_role,
    sid_to_bytes,
)
from retrieval_svc.key_entry import reserved_role

DOMAIN = "S-1-5-21-1965625592-1857721792-3928199354"
# objectSid of a user (RID 1102) as Samba's LDAP server sent it (ldapsearch, base64
# AQUAAAAAAAUVAAAA+BApdcCVum66kCPqTgQAAA==).
RAW_1102 = bytes.fromhex("010500000000000515000000f8102975c095ba6eba9023ea4e040000")


def test_a_binary_sid_is_read_as_windows_writes_it() -> None:
    assert sid_from_bytes(RAW_1102) == f"{DOMAIN}-1102"
    assert sid_to_bytes(f"{DOMAIN}-1102") == RAW_1102
    assert sid_from_bytes(bytes.fromhex("010100000000000100000000")) == "S-1-1-0"


@pytest.mark.parametrize(
    "raw", [b"", b"\x01", bytes.fromhex("020100000000000100000000"), RAW_1102[:-1]]
)
def test_what_is_not_a_sid_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        sid_from_bytes(raw)


@given(st.integers(0, 2**48 - 1), st.lists(st.integers(0, 2**32 - 1), max_size=15))
def test_binary_and_text_forms_round_trip(authority: int, subs: list[int]) -> None:
    text = "-".join(["S-1", str(authority), *map(str, subs)])
    assert sid_from_bytes(sid_to_bytes(text)) == text == parse_sid(text.lower())


@pytest.mark.parametrize(
    "text",
    [
        "S-2-5-11", "S-1", "S-1-5-", "S-1-5-4294967296", "sid:S-1-1-0", "S-1-5-11 x", "1-5",
        # Digits of other scripts are no SID's (Python's ``\\d`` and ``int`` take them): an
        # FSP's name spelled so must not resolve to a SID this directory holds.
        "S-1-5-21-1-2-3-\u0661\u0661\u0660\u0664", "S-1-5-\uff12\uff11-1", "S-1-\u0665-11",
    ],
)  # fmt: skip
def test_malformed_sid_text_is_none(text: str) -> None:
    assert parse_sid(text) is None


def test_sid_roles_have_one_spelling() -> None:
    assert sid_role("s-1-5-11") == "sid:S-1-5-11"
    assert role_sid("sid:S-1-5-11") == "S-1-5-11"
    assert role_sid("法务部") is None
    assert {"sid:S-1-1-0", "sid:S-1-5-11"} == PERSON_ROLES


@pytest.mark.parametrize(
    "role",
    [
        "sid:S-1-1-0",
        "SID:S-1-5-11",
        "Sid:anything",
        "\uff53\uff49\uff44:S-1-1-0",
        "\uff53\uff49\uff44\uff1aS-1-5-11",
    ],
)
def test_no_caller_and_no_hand_grant_spells_a_sid_role(role: str) -> None:
    assert reserved_role(role) is not None
    with pytest.raises(PolicyError, match="Windows SID"):
        checked_role("role", role)
