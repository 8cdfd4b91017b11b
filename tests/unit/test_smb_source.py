"""The SMB source's parts that need no server: its address, its credentials, and what it says
when a file's access list cannot be read (against a share: tests/integration/test_smb_*.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from indexer.documents import DocumentError, SourceObject, build_chunks
from indexer.loading import NOBODY, IndexOptions, outside_of
from indexer.permissions import Outside
from indexer.permissions.dacl import FileAccess, file_access
from indexer.permissions.security_descriptor import (
    Ace,
    SecurityDescriptor,
    security_descriptor_bytes,
)
from indexer.sources import ObjectRef, SmbCredentials, SmbSource, open_source
from indexer.sources.smb import REPARSE_REASON, SIDECAR_OFF_REASON, ServerGone, parse_smb_url
from retrieval_svc import reasons
from retrieval_svc.acl.known_sids import KnownSids

LEGAL, INTERN = "S-1-5-21-1-2-3-1101", "S-1-5-21-1-2-3-1104"
CREDS = SmbCredentials("CORP\\svc", "pw", "ntlm")


def test_the_address() -> None:
    assert parse_smb_url("smb://fs1/部门资料/法务/合同") == ("fs1", 445, "部门资料", "法务/合同")
    assert parse_smb_url("smb://fs1:4445/share") == ("fs1", 4445, "share", "")
    assert parse_smb_url("smb://fs1/%E9%83%A8%E9%97%A8/x") == ("fs1", 445, "部门", "x")
    for bad in ("smb://fs1", "smb:///share", "smb://fs1/share/../x"):
        with pytest.raises(ValueError):
            parse_smb_url(bad)


def test_credentials_never_in_the_address() -> None:
    with pytest.raises(ValueError, match="RSVC_SMB_USER"):
        parse_smb_url("smb://svc:secret@fs1/share")


def test_credentials_from_the_environment_or_a_secret_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret-口令\n", encoding="utf-8")
    env = {"RSVC_SMB_USER": "CORP\\svc", "RSVC_SMB_PASSWORD_FILE": str(secret)}
    assert SmbCredentials.from_env(env) == SmbCredentials("CORP\\svc", "s3cret-口令")
    env["RSVC_SMB_PASSWORD"] = "from-env"
    assert SmbCredentials.from_env(env).password == "from-env"
    with pytest.raises(ValueError, match="RSVC_SMB_AUTH"):
        SmbCredentials.from_env({"RSVC_SMB_AUTH": "basic"})
    with pytest.raises(ValueError, match="NTLM needs"):
        SmbCredentials.from_env({"RSVC_SMB_AUTH": "ntlm", "RSVC_SMB_USER": "svc"})
    with pytest.raises(ValueError, match="cannot be read"):
        SmbCredentials.from_env({"RSVC_SMB_PASSWORD_FILE": str(tmp_path / "absent")})


def test_open_source_knows_smb() -> None:
    source = open_source("smb://fs1/部门资料/法务")
    assert isinstance(source, SmbSource)
    assert source.location == "smb://fs1/部门资料/法务/"
    assert source._unc("合同.md") == "\\\\fs1\\部门资料\\法务\\合同.md"


def _source_failing_with(exc: BaseException | bytes) -> SmbSource:
    source = SmbSource("smb://fs1/share", CREDS)

    def descriptor(key: str) -> bytes:
        if isinstance(exc, bytes):
            return exc
        raise exc

    source.security_descriptor = descriptor  # type: ignore[method-assign]
    return source


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        pytest.param(PermissionError(13, "STATUS_ACCESS_DENIED"), "dacl_unreadable", id="denied"),
        pytest.param(b"\x01\x00\x04\x80" + b"\x00" * 12 + b"\xff", "dacl_malformed", id="bad"),
    ],
)
def test_an_unreadable_descriptor_fails_its_document_never_publishes_it(
    answer: BaseException | bytes, code: str
) -> None:
    """What the source says when a DACL cannot be read or parsed reaches the document as a
    failure (withdrawn where it was indexed), with a row in the reasons table."""
    why = _source_failing_with(answer)._dacl("法务/合同.md")
    assert isinstance(why, str)
    ref = ObjectRef("法务/合同.md", "smb://fs1/share/法务/合同.md", "e", 1, "i", dacl=why)
    with pytest.raises(DocumentError) as failed:
        outside_of(SmbSource("smb://fs1/share", CREDS), ref, IndexOptions("kb", "alias"))
    assert reasons.failure_code(str(failed.value)) == code
    assert re.search(r"[\u4e00-\u9fff]", reasons.failure_text(str(failed.value), "zh"))


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(ConnectionResetError(104, "reset"), id="reset"),
        pytest.param(ValueError("Failed to connect to 'fs1:445': refused"), id="refused"),
    ],
)
def test_a_server_gone_while_a_descriptor_is_read_is_no_answer_about_the_file(
    answer: BaseException,
) -> None:
    """The connection lost is an outage of the source (the listing stops, nothing pruned),
    never a withdrawal of the file (tests/integration/test_smb_robust_es.py)."""
    with pytest.raises(ServerGone):
        _source_failing_with(answer)._dacl("法务/合同.md")


def test_a_file_gone_before_its_descriptor_is_read_is_gone() -> None:
    assert _source_failing_with(FileNotFoundError(2, "gone"))._dacl("a.md") is None


def test_a_dacl_no_one_may_read_is_never_indexed() -> None:
    nobody = file_access(SecurityDescriptor(None, None, ()), "a.md")
    ref = ObjectRef("a.md", "u", "e", 1, "i", dacl=nobody)
    with pytest.raises(DocumentError, match=re.escape(NOBODY)):
        outside_of(SmbSource("smb://fs1/share", CREDS), ref, IndexOptions("kb", "alias"))
    assert reasons.failure_code(NOBODY) == "dacl_nobody"
    assert reasons.passed_over_code(REPARSE_REASON) == "reparse_point"


def _chunks(
    dacl_aces: tuple[Ace, ...],
    sidecar: dict[str, object],
    unmatched: str = "",
    known: frozenset[str] = frozenset({LEGAL, INTERN}),
) -> dict[str, object]:
    access = file_access(SecurityDescriptor(None, None, dacl_aces), "法务/合同.md", known)
    obj = SourceObject(
        uri="smb://fs1/share/法务/合同.md",
        identity="smb://fs1/share/法务/合同.md",
        name="法务/合同.md",
        text="# 合同\n\n条款",
        metadata_layers=(sidecar,),
        layer_names=("sidecar",),
        outside=Outside(
            dacl=access, rules_file="acl-rules.yaml" if unmatched else "", unmatched=unmatched
        ),
    )
    return build_chunks(obj, knowledge_id="kb", dataset_name="kb")[0]


def test_the_dacl_sets_the_roles_and_a_sidecar_only_narrows_them() -> None:
    allow, deny = Ace(0, 0, 0x120089, LEGAL), Ace(1, 0, 0x120089, INTERN)
    chunk = _chunks((deny, allow), {})
    assert chunk["access_roles"] == [f"sid:{LEGAL}"]
    assert chunk["access_denied"] == [f"sid:{INTERN}"]
    assert "access_also" not in chunk
    meta = chunk["metadata"]
    assert isinstance(meta, dict)
    assert meta["access_roles_from"] == "DACL of 法务/合同.md"
    assert meta["access_aces"] == [
        f"deny {INTERN} on 法务/合同.md",
        f"allow {LEGAL} on 法务/合同.md",
    ]
    # A sidecar saying "public" cannot widen it; one naming a role narrows it.
    assert "access_also" not in _chunks((allow,), {"access_roles": []})
    narrowed = _chunks((allow,), {"access_roles": ["合同审阅"]})
    assert narrowed["access_roles"] == [f"sid:{LEGAL}"]
    assert narrowed["access_also"] == ["合同审阅"]
    assert reasons.roles_source_text("DACL of 法务/合同.md", "zh") == "法务/合同.md 的 DACL"


def test_a_rules_file_refusing_unmatched_objects_does_not_refuse_a_file_its_dacl_decides() -> None:
    """The DACL gives every file of a share its roles: ``unmatched: refuse`` has nothing to
    refuse, and ``unmatched: public`` nothing to open."""
    allow = Ace(0, 0, 0x120089, LEGAL)
    for unmatched in ("refuse", "public"):
        assert _chunks((allow,), {}, unmatched)["access_roles"] == [f"sid:{LEGAL}"]


def test_a_deny_no_sync_read_is_named_on_the_document_and_in_the_run() -> None:
    """A deny of a SID the directory does not know refuses every person (Everyone's role in
    ``access_denied``), and the document and the source's run name the SID."""
    allow, deny = Ace(0, 0, 0x120089, LEGAL), Ace(1, 0, 0x120089, INTERN)
    chunk = _chunks((deny, allow), {}, known=frozenset({LEGAL}))
    assert chunk["access_denied"] == ["sid:S-1-1-0"]
    assert chunk["access_roles"] == [f"sid:{LEGAL}"]
    meta = chunk["metadata"]
    assert isinstance(meta, dict) and meta["access_unknown_sids"] == [INTERN]
    # The source judges against what its directory says at each whole listing.
    source = _source_failing_with(
        security_descriptor_bytes(SecurityDescriptor(None, None, (deny, allow)))
    )
    source.directory = lambda: KnownSids(frozenset({LEGAL, INTERN}))
    early = source._dacl("法务/合同.md")  # (before any listing: read at first use)
    assert isinstance(early, FileAccess) and early.exact and early.deny == (INTERN,)
    source.directory = lambda: KnownSids(frozenset({LEGAL}))
    source.refresh_known()
    access = source._dacl("法务/合同.md")
    assert isinstance(access, FileAccess) and access.unknown == (INTERN,)
    assert source.fail_closed_count == {INTERN: 1} and source.fail_closed == {
        INTERN: ["法务/合同.md"]
    }
    source.directory = lambda: KnownSids(frozenset({LEGAL, INTERN}))
    source.refresh_known()
    access = source._dacl("法务/合同.md")
    assert isinstance(access, FileAccess) and access.exact and access.deny == (INTERN,)
    assert source.fail_closed_count == {}


def test_a_sidecar_on_a_share_is_not_read_unless_asked() -> None:
    """Whoever may create a file in a share's folder may write ``x.md.meta.json``: by default
    it is passed over and named, and a document's sidecar never read."""
    source = SmbSource("smb://fs1/share", CREDS)
    ref = ObjectRef("a.md", "u", "e", 1, "i", sidecar="123-4")
    source._read = lambda *_: b'{"access_roles": ["x"], "title": "forged"}'  # type: ignore[method-assign]
    assert source.sidecar(ref) == {}
    source.sidecars = True
    assert source.sidecar(ref)["title"] == "forged"
    assert reasons.passed_over_code(SIDECAR_OFF_REASON) == "share_sidecar"
    assert re.search(r"[\u4e00-\u9fff]", reasons.passed_over_text(SIDECAR_OFF_REASON, "zh"))


def test_a_name_that_is_no_utf16_fails_its_folder_not_the_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NTFS keeps a name with an unpaired surrogate (Windows never checks UTF-16), which the
    SMB client cannot decode: whoever may create a file in one folder planted it, and before
    this the decoding error was taken for the server gone — the whole share an outage on
    every run. Now that folder's listing fails (its documents withdrawn), the rest is listed.
    (Samba refuses such a name, STATUS_ILLEGAL_CHARACTER, so no test server can hold one.)"""
    import datetime
    import types

    import smbclient

    def entry(name: str, attributes: int) -> types.SimpleNamespace:
        info = types.SimpleNamespace(
            file_attributes=attributes,
            last_write_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            end_of_file=1,
        )
        return types.SimpleNamespace(name=name, smb_info=info)

    def scandir(path: str, *_: object, **__: object) -> list[types.SimpleNamespace]:
        folder = path.split("\\", 4)[4] if path.count("\\") >= 4 else ""
        if folder == "攻击":
            raise UnicodeDecodeError("utf-16-le", b"\x00\xd8", 0, 2, "unexpected end of data")
        if folder == "":
            return [entry("攻击", 0x10), entry("法务", 0x10)]
        return [entry("合同.md", 0x20)]

    monkeypatch.setattr(smbclient, "scandir", scandir)
    source = _source_failing_with(
        security_descriptor_bytes(SecurityDescriptor(None, None, (Ace(0, 0, 0x120089, LEGAL),)))
    )
    source._read_share = lambda: None  # type: ignore[method-assign]
    listed = [ref.key for ref in source._walk("")]
    assert listed == ["法务/合同.md"]
    assert [(f.key, f.scope) for f in source.failures] == [("攻击", "folder")]
    assert "UnicodeDecodeError" in source.failures[0].reason
    # Nor is such an error, reading a descriptor, taken for the server gone.
    decoding = UnicodeDecodeError("utf-16-le", b"\x00\xd8", 0, 2, "x")
    assert isinstance(_source_failing_with(decoding)._dacl("a.md"), str)


def test_a_notification_naming_no_utf16_name_keeps_the_others() -> None:
    """A change notification whose batch holds a name that is no UTF-16 still gives the
    batch's other names (before: the decoding error dropped the batch and restarted the
    watch, so a planted file's every change delayed everyone's narrowing to a re-listing)."""
    from indexer.watch.share_events import _keys

    class Field:
        def __init__(self, raw: bytes) -> None:
            self.raw = raw

        def get_value(self) -> bytes:
            return self.raw

    bad = {"file_name": Field("攻击\\".encode("utf-16-le") + b"\x00\xd8")}
    good = {"file_name": Field("法务\\合同.md".encode("utf-16-le"))}
    assert _keys([bad, good]) == {"法务/合同.md"}
