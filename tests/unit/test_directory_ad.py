"""Active Directory's shapes read by the directory sync (retrieval_svc.directory.ad), without a
server: ranged attributes, primary groups, nested groups, disabled accounts and foreign
security principals. (Against a real domain controller: tests/integration/test_directory_ad.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_svc.acl.identities import Directory as Aliases
from retrieval_svc.directory import ad
from retrieval_svc.directory.ad import AdGroup, AdUser, build
from retrieval_svc.directory.ad_wire import is_ad, range_of, ranged
from retrieval_svc.directory.groups import (
    DirectoryError,
    mapping,
    plan,
    wanted_grants,
    wanted_sids,
)

DOMAIN = "S-1-5-21-1965625592-1857721792-3928199354"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("member;range=0-1499", (0, 1499)),
        ("member;range=1500-*", (1500, None)),
        ("Member;Range=3000-4499", (3000, 4499)),
        ("member", None),
        ("memberOf;range=0-*", None),
    ],
)
def test_range_keys_as_windows_answers_them(key: str, expected: Any) -> None:
    assert range_of(key, "member") == expected


def test_an_unreadable_range_is_an_error() -> None:
    with pytest.raises(DirectoryError):
        range_of("member;range=a-b", "member")


class _Ranges:
    """A connection answering ``member;range=N-*`` searches from ``pages``, as AD does."""

    def __init__(self, pages: dict[str, dict[str, list[bytes]]]) -> None:
        self.pages, self.asked, self.response = pages, [], []  # type: ignore[var-annotated]

    def search(self, dn: str, _filter: str, _scope: Any, attributes: list[str]) -> None:
        self.asked.append(attributes[0])
        raw = self.pages.get(attributes[0])
        self.response = [{"type": "searchResEntry", "dn": dn, "raw_attributes": raw}] if raw else []


def _members(n: int, start: int = 0) -> list[bytes]:
    return [f"CN=u{i},CN=Users,DC=corp".encode() for i in range(start, start + n)]


def test_ranged_members_are_read_to_the_end() -> None:
    conn = _Ranges({
        "member;range=1500-*": {"member;range=1500-2999": _members(1500, 1500)},
        "member;range=3000-*": {"member;range=3000-*": _members(7, 3000)},
    })  # fmt: skip
    entry = {"dn": "CN=big,DC=corp", "raw_attributes": {"member;range=0-1499": _members(1500)}}
    assert ranged(conn, entry, "member") == _members(3007)
    assert conn.asked == ["member;range=1500-*", "member;range=3000-*"]


@pytest.mark.parametrize(
    "pages",
    [
        pytest.param({}, id="the-next-range-answers-nothing"),
        pytest.param({"member;range=1500-*": {"member": []}}, id="no-range-in-the-answer"),
        pytest.param({"member;range=1500-*": {"member;range=1600-*": _members(3)}}, id="a-gap"),
    ],
)
def test_a_partial_member_list_is_never_taken_for_the_whole(pages: Any) -> None:
    entry = {"dn": "CN=big,DC=corp", "raw_attributes": {"member;range=0-1499": _members(1500)}}
    with pytest.raises(DirectoryError, match=r"partial|does not follow"):
        ranged(_Ranges(pages), entry, "member")


def _dn(name: str) -> str:
    return f"CN={name},CN=Users,DC=corp,DC=example,DC=org"


def _user(name: str, rid: int, primary: int = 513, disabled: bool = False) -> AdUser:
    mail = {"mail": ["qianqi@corp.example.org"]} if name == "钱七" else {}
    return AdUser(_dn(name), name, f"{DOMAIN}-{rid}", primary, disabled, mail)


FSP = "CN={},CN=ForeignSecurityPrincipals,DC=corp,DC=example,DC=org"


def _domain() -> tuple[list[AdGroup], list[AdUser]]:
    groups = [
        AdGroup(_dn("Domain Users"), "Domain Users", f"{DOMAIN}-513", []),
        AdGroup(_dn("集团全员"), "集团全员", f"{DOMAIN}-1104", [_dn("华东区")]),
        AdGroup(_dn("华东区"), "华东区", f"{DOMAIN}-1105", [_dn("上海办公室")]),
        AdGroup(_dn("上海办公室"), "上海办公室", f"{DOMAIN}-1106", [_dn("王五")]),
        AdGroup(
            _dn("法务部"),
            "法务部",
            f"{DOMAIN}-1102",
            [_dn("钱七"), FSP.format("S-1-5-21-1000-2000-3000-1104")],
        ),
        AdGroup(_dn("财务部"), "财务部", f"{DOMAIN}-1103", []),
        AdGroup(_dn("公告读者"), "公告读者", f"{DOMAIN}-1107", [FSP.format("S-1-5-11")]),
    ]
    users = [
        _user("王五", 1110),
        _user("赵六", 1111),
        _user("钱七", 1112, disabled=True),
        _user("孙八", 1113, primary=1103),
    ]
    return groups, users


def test_a_person_holds_their_primary_groups_nested_groups_and_own_sid() -> None:
    directory = build(*_domain())
    roles = mapping({"Domain Users": ["全体员工"]})
    held: dict[str, set[str]] = {}
    for user, role, _ in wanted_grants(directory, roles, "acme"):
        held.setdefault(user, set()).add(role)
    for user, sids in wanted_sids(directory).items():
        held.setdefault(user, set()).update(f"sid:{s}" for s in sids)
    sid = f"sid:{DOMAIN}-"
    # 赵六 is only in Domain Users, through primaryGroupID: the mapped role reaches him.
    assert held["user:赵六"] == {"全体员工", sid + "513", sid + "1111", sid + "1107"}
    # 王五: three groups deep, and Domain Users; 公告读者 holds Authenticated Users.
    assert held["user:王五"] == {
        "全体员工", sid + "513", sid + "1110", sid + "1106", sid + "1105", sid + "1104",
        sid + "1107",
    }  # fmt: skip
    # 孙八's primary group is 财务部: not Domain Users.
    assert held["user:孙八"] == {sid + "1103", sid + "1113", sid + "1107"}
    assert "user:钱七" not in held  # disabled
    assert directory.disabled == 1
    assert directory.foreign == {"S-1-5-21-1000-2000-3000-1104": ["法务部"]}


def test_sids_are_kept_per_person_not_as_policy_lines() -> None:
    """A person's SIDs are one row of theirs (``directory_sids``), not a ``g`` line per SID:
    no grant and no owned role names a SID; every SID read is known, a disabled account's
    not."""
    directory = build(*_domain())
    roles = mapping({"Domain Users": ["全体员工"]})
    assert not any(r.startswith("sid:") for _, r, _ in wanted_grants(directory, roles, "acme"))
    assert roles.owned(directory) == {"全体员工"}
    made = plan(directory, roles, "acme", [])
    assert not any(c.values[1].startswith("sid:") for c in made.changes)
    assert set(made.sids) == {"user:王五", "user:赵六", "user:孙八"}
    assert {f"{DOMAIN}-513", f"{DOMAIN}-1111", f"{DOMAIN}-1103"} <= made.known_sids
    # A disabled account's SID is read, so known (a share's deny naming it refuses exactly
    # its holders: no one), and nobody's: no one holds it.
    assert f"{DOMAIN}-1112" in made.known_sids
    assert not any(f"{DOMAIN}-1112" in held for held in made.sids.values())


def test_a_group_whose_members_were_not_all_read_is_not_known() -> None:
    """上海办公室 lists a group outside the sync's searches (an OU not read): whoever is in it
    holds 上海办公室, 华东区 and 集团全员 in Windows but not here, so none of their SIDs is
    known (a deny naming one refuses every person); an allow still reaches the members read."""
    groups, users = _domain()
    outside = "CN=外包组,OU=外部,DC=corp,DC=example,DC=org"
    groups = [
        AdGroup(g.dn, g.name, g.sid, [*g.members, outside]) if g.name == "上海办公室" else g
        for g in groups
    ]
    directory = build(groups, users)
    nested = {f"{DOMAIN}-1106", f"{DOMAIN}-1105", f"{DOMAIN}-1104"}
    assert directory.partial_sids == nested | {f"{DOMAIN}-1102"}  # (法务部: a foreign principal)
    known = plan(directory, mapping({}, all_groups=False), "acme", []).known_sids
    assert not nested & known and {f"{DOMAIN}-513", f"{DOMAIN}-1110"} <= known
    assert f"{DOMAIN}-1104" in wanted_sids(directory)["user:王五"]
    assert build(*_domain()).partial_sids == {f"{DOMAIN}-1102"}  # (only 法务部's foreigner)


@pytest.mark.parametrize(
    ("principal", "every_person"),
    [
        pytest.param("S-1-5-2", True, id="NETWORK"),
        pytest.param("S-1-5-15", True, id="This-Organization"),
        pytest.param("S-1-5-11", True, id="Authenticated-Users"),
        pytest.param("S-1-5-21-1000-2000-3000-1104", False, id="another-domain"),
        pytest.param("S-1-5-9", False, id="Enterprise-DCs"),
    ],
)
def test_a_group_holding_a_principal_nobody_here_resolves_is_not_known(
    principal: str, every_person: bool
) -> None:
    """Every SMB session holds NETWORK and This Organization, as it holds Authenticated Users:
    a group holding one is every person's (before: nobody's, and known, so a share's deny
    naming the group refused nobody where Windows refuses every person). A principal this read
    cannot resolve — another domain's person, a well-known SID of no person listed here —
    holds the group in a token the index cannot tell: the group's SID (and every group's
    holding it) is not known, so its deny refuses every person; its allows still reach the
    members read. INTERACTIVE (BUILTIN\\Users holds it on every DC) is no person's session."""
    groups, users = _domain()
    fsp = [FSP.format(principal), FSP.format("S-1-5-4")]
    groups = [
        AdGroup(g.dn, g.name, g.sid, [*g.members, *fsp]) if g.name == "上海办公室" else g
        for g in groups
    ]
    directory = build(groups, users)
    nested = {f"{DOMAIN}-1106", f"{DOMAIN}-1105", f"{DOMAIN}-1104"}
    held = wanted_sids(directory)
    known = plan(directory, mapping({}, all_groups=False), "acme", []).known_sids
    if every_person:
        assert all(nested <= sids for sids in held.values()), held
        assert nested <= known
    else:
        assert nested <= directory.partial_sids and not nested & known
        assert nested <= held["user:王五"] and not nested & held["user:赵六"]
        assert principal in directory.foreign
    assert "S-1-5-4" not in directory.foreign


def test_a_disabled_account_is_no_one_even_with_a_hand_grant() -> None:
    """钱七 is disabled in AD: the sync records his ids as refused, so a hand grant naming him
    (or his mail) does not make him a known person — no Everyone, no roles."""
    directory = build(*_domain())
    directory.kinds = {"id": "ad", "mail": "email"}
    changes = plan(directory, mapping({}, all_groups=False), "acme", [])
    people = Aliases.of(changes.identities)
    for asked in ("钱七", "qianqi@corp.example.org"):
        who = people.resolve(asked, "acme", granted=True)
        assert who.person is None and who.status == "unknown", who
        assert "disabled" in who.via
    assert people.resolve("张三", "acme", granted=True).person == "张三"


def test_ad_is_detected_from_the_root_dse() -> None:
    assert is_ad({"supportedCapabilities": ["1.2.840.113556.1.4.800"]})
    assert is_ad({"forestFunctionality": ["7"]})
    assert not is_ad({"supportedCapabilities": [], "namingContexts": ["dc=example,dc=org"]})


def _entry(name: str, expires: str) -> dict[str, Any]:
    return {"dn": _dn(name), "raw_attributes": {
        "sAMAccountName": [name.encode()], "primaryGroupID": [b"513"],
        "userAccountControl": [b"512"], "accountExpires": [expires.encode()]}}  # fmt: skip


@pytest.mark.parametrize(
    ("expires", "held"),
    [
        ("0", True),  # never
        ("9223372036854775807", True),  # never
        ("132223104000000000", False),  # 2020-01-01: Windows refuses the logon
        ("991223104000000000", True),  # 4742: not yet
    ],
)
def test_an_expired_account_is_no_one(expires: str, held: bool) -> None:
    user = ad.user_of(_entry("周九", expires), "sAMAccountName", [])
    directory = build([], [user])
    assert (_dn("周九").lower() in {d.lower() for d in directory.users}) is held
    assert directory.disabled == (0 if held else 1)
