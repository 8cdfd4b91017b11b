"""A share's own ACL: read over srvsvc (NetrShareGetInfo level 502, bounds-checked NDR) and
combined with each file's DACL as Windows combines them — only what both allow."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.documents import DocumentError, share_lists
from indexer.permissions.dacl import EVERY_PERSON, EVERYONE, file_access, role_of, visible
from indexer.permissions.security_descriptor import (
    SE_DACL_PRESENT,
    SE_SELF_RELATIVE,
    SecurityDescriptor,
    SecurityDescriptorError,
    security_descriptor_bytes,
)
from indexer.permissions.share import share_access, with_share
from indexer.sources import srvsvc
from indexer.sources.srvsvc import ShareInfoError, ShareInfoRefused, share_descriptor
from tests.unit.test_dacl import (
    ADMINS,
    ALICE,
    HR,
    INTERN,
    KNOWN,
    LEGAL,
    OWNER,
    allow,
    deny,
    descriptors,
    real_sids,
    reference,
    sd,
)

FULL = 0x1F01FF


def blob(*aces: object) -> bytes:
    control = SE_DACL_PRESENT | SE_SELF_RELATIVE
    return security_descriptor_bytes(SecurityDescriptor(None, None, tuple(aces), control))  # type: ignore[arg-type]


def _wide(text: str, declared: int | None = None) -> bytes:
    data = (text + "\0").encode("utf-16-le")
    n = len(data) // 2
    out = struct.pack("<III", declared or n, 0, n) + data
    return out + b"\0" * (-len(out) % 4)


def answer(descriptor: bytes | None, status: int = 0, size: int | None = None) -> bytes:
    """NetrShareGetInfo's stub as a server writes it: level, SHARE_INFO_502, its strings and
    descriptor deferred, then the status."""
    sd_ptr = 0x20010 if descriptor is not None else 0
    body = struct.pack("<II", 502, 0x20000)
    body += struct.pack(
        "<10I", 0x20004, 0, 0x20008, 0, 0xFFFFFFFF, 1, 0x2000C, 0,
        len(descriptor or b"") if size is None else size, sd_ptr,
    )  # fmt: skip
    body += _wide("部门资料") + _wide("") + _wide("C:\\share")
    if descriptor is not None:
        body += struct.pack("<I", len(descriptor)) + descriptor
        body += b"\0" * (-len(body) % 4)
    return body + struct.pack("<I", status)


def test_the_share_acl_is_read_from_the_answer() -> None:
    acl = blob(allow(ADMINS, FULL), allow(HR))
    assert share_descriptor(answer(acl)) == acl
    assert share_descriptor(answer(None)) is None  # (no ACL set: Windows' default)


def test_a_refusal_names_its_status() -> None:
    with pytest.raises(ShareInfoRefused, match="ERROR_ACCESS_DENIED") as refused:
        share_descriptor(struct.pack("<II", 502, 0) + struct.pack("<I", 5))
    assert refused.value.status == 5


@pytest.mark.parametrize(
    "stub",
    [
        b"",
        b"\0" * 7,
        answer(blob(allow(HR)))[:-9] + struct.pack("<I", 0),  # the descriptor cut short
        answer(blob(allow(HR)), size=999),  # a size that disagrees with the array's
        struct.pack("<II", 2, 0x20000) + b"\0" * 40 + struct.pack("<I", 0),  # another level
        struct.pack("<II", 502, 0) + struct.pack("<I", 0),  # success without an answer
    ],
)
def test_malformed_answers_are_refused(stub: bytes) -> None:
    with pytest.raises(ShareInfoError):
        share_descriptor(stub)


@given(st.data())
@settings(max_examples=400, deadline=None)
def test_scribbled_answers_never_raise_anything_else(data: st.DataObject) -> None:
    raw = bytearray(answer(blob(allow(HR), deny(INTERN))))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for stub in (bytes(raw), bytes(raw[:cut])):
        try:
            found = share_descriptor(stub)
        except ShareInfoError:
            continue
        try:
            share_access(found, "s", KNOWN)
        except SecurityDescriptorError:
            pass


def test_pdus_are_checked() -> None:
    bind = srvsvc.bind_pdu(1)
    assert len(bind) == struct.unpack_from("<H", bind, 8)[0] == 72
    with pytest.raises(ShareInfoError, match="call 1, not 2"):
        srvsvc.fragments(bind, 2)
    with pytest.raises(ShareInfoError):
        srvsvc.fragments(bind[:40], 1)  # its length says more than there is
    with pytest.raises(ShareInfoRefused):
        srvsvc.response_stub(srvsvc.PTYPE_FAULT, struct.pack("<IHBBI", 0, 0, 0, 0, 5))
    nak = struct.pack("<H", 2)
    with pytest.raises(ShareInfoRefused):
        srvsvc.check_bind_ack(srvsvc.PTYPE_BIND_NAK, nak)
    refused = (
        struct.pack("<HHIH", 4280, 4280, 1, 0) + b"\0\0" + struct.pack("<BBHHH", 1, 0, 0, 2, 1)
    )
    with pytest.raises(ShareInfoRefused):
        srvsvc.check_bind_ack(srvsvc.PTYPE_BIND_ACK, refused + b"\0" * 20)


def test_everyone_full_narrows_nothing() -> None:
    assert share_access(blob(allow(EVERYONE, FULL)), "s", KNOWN) is None
    assert share_access(None, "s", KNOWN) is None
    assert share_access(blob(allow(HR)), "s", KNOWN) is not None


def test_the_share_decides_where_the_file_allows_everyone() -> None:
    file = file_access(sd(allow(EVERYONE)), "a.md", KNOWN)
    share = share_access(blob(allow(ADMINS, FULL), allow(HR)), "部门资料", KNOWN)
    both = with_share(file, share, "部门资料")
    assert both.allow == (ADMINS, HR) and both.also == ()
    assert "allow S-1-5-32-544 (BUILTIN\\Administrators) on share 部门资料" in [
        d.shown() for d in both.deciders
    ]


def test_two_lists_where_neither_holds_the_other() -> None:
    file = file_access(sd(allow(LEGAL)), "a.md", KNOWN)
    share = share_access(blob(allow(HR)), "s", KNOWN)
    both = with_share(file, share, "s")
    assert (both.allow, both.also) == ((LEGAL,), (HR,))
    assert not visible(both, {EVERYONE, LEGAL}) and visible(both, {EVERYONE, LEGAL, HR})


def test_a_share_deny_refuses_on_every_file() -> None:
    share = share_access(blob(deny(ALICE), allow(EVERYONE, FULL)), "s", KNOWN)
    both = with_share(file_access(sd(allow(HR)), "a.md", KNOWN), share, "s")
    assert both.deny == (ALICE,) and not visible(both, {EVERYONE, HR, ALICE})


@given(descriptors, descriptors, real_sids, st.booleans())
@settings(max_examples=1500, deadline=None)
def test_never_wider_than_windows_and_exact_when_it_says_so(
    file: SecurityDescriptor, share: SecurityDescriptor, sids: frozenset[str], is_person: bool
) -> None:
    """Windows reads through the share only what both ACLs allow; the index never shows more,
    and exactly that for a person when both are exact. (Only a person the tenant knows holds
    ``sid:`` roles — the directory gives them, no caller may assert one — and every such
    person holds Everyone's: a caller who is no one holds no SID at all.)"""
    sids = sids if is_person else frozenset()
    real = sids | EVERY_PERSON if is_person else sids
    folded = sids | {EVERYONE} if is_person else sids
    shared = (
        share_access(security_descriptor_bytes(share), "s", KNOWN)
        if share.dacl is not None
        else None
    )
    both = with_share(file_access(file, "a.md", KNOWN), shared, "s")
    windows = reference(file, real) and reference(share, real)
    shown = visible(both, folded)
    assert not shown or windows, "wider than Windows"
    if both.exact and is_person:
        assert shown is windows
    # With a rules file narrowing it too (three lists for two): never wider either.
    if both.also and not both.nobody:
        try:
            roles, also, _ = share_lists([], ["finance"], both, "a.md")
        except DocumentError:
            return
        index = (
            bool(set(roles) & {role_of(s) for s in folded})
            and "finance" in also
            and not {role_of(s) for s in both.deny} & {role_of(s) for s in folded}
        )
        assert not index or windows, "three lists: wider than Windows"


def test_three_lists_fold_to_the_sids_both_name() -> None:
    both = with_share(
        file_access(sd(allow(LEGAL), allow(OWNER)), "a.md", KNOWN),
        share_access(blob(allow(HR), allow(OWNER)), "s", KNOWN),
        "s",
    )
    roles, also, narrowed = share_lists([role_of(LEGAL)], ["finance"], both, "a.md")
    assert roles == [role_of(OWNER)] and also == ["finance"]
    assert set(narrowed) == {LEGAL, HR}
    disjoint = with_share(
        file_access(sd(allow(LEGAL)), "a.md", KNOWN), share_access(blob(allow(HR)), "s", KNOWN), "s"
    )
    with pytest.raises(DocumentError, match="no SID in common"):
        share_lists([role_of(LEGAL)], ["finance"], disjoint, "a.md")


def test_the_words_name_the_share_in_both_languages() -> None:
    from indexer.loading import NOBODY_SHARE
    from indexer.sources.smb_share import SHARE_UNREADABLE
    from retrieval_svc import reasons

    said = reasons.roles_source_text("DACL of 公开.md, share 财务共享", "zh")
    assert said == "公开.md 的 DACL 与共享 财务共享 的共享权限"
    narrowed = reasons.roles_source_text("DACL of a.md, share 财务共享, narrowed by sidecar", "zh")
    assert "财务共享" in narrowed and "收窄" in narrowed
    unreadable = SHARE_UNREADABLE + "ShareInfoRefused: NetrShareGetInfo answered 0x00000005"
    assert reasons.failure_code(unreadable) == "share_acl_unreadable"
    assert "Administrators" in reasons.failure_text(unreadable, "zh")
    assert reasons.failure_code(NOBODY_SHARE.format(share="s")) == "share_nobody"
    try:
        file = file_access(sd(allow(LEGAL)), "a", KNOWN)
        share_lists([], ["finance"], with_share(file, share_access(blob(allow(HR)), "s"), "s"), "a")
    except DocumentError as exc:
        assert reasons.failure_code(str(exc)) == "share_nobody"
    else:
        raise AssertionError("three lists with nothing in common were indexed")


def test_a_share_deny_the_directory_cannot_resolve_refuses_every_person() -> None:
    """As a file's deny does (``indexer.permissions.dacl``): fail closed, named."""
    outsider = "S-1-5-21-9-9-9-1000"
    share = share_access(blob(deny(outsider), allow(EVERYONE, FULL)), "s", KNOWN)
    both = with_share(file_access(sd(allow(HR)), "a.md", KNOWN), share, "s")
    assert both.unknown == (outsider,) and EVERYONE in both.deny and not both.exact
    assert not visible(both, {EVERYONE, HR})
