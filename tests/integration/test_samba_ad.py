"""The suite's Active Directory domain controller (scripts/samba-ad.sh, tests.support.samba_ad)
is what the SMB and directory tests take it for: each test person logs in over SMB with the
known password (a disabled account cannot), NT ACLs written over SMB are enforced, the SIDs
belong to the domain it printed, and a second DC runs beside the first on an address of its
own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import samba_ad as support
from tests.support.samba_ad import DomainController, smb_acl, smb_admin, smb_read

ENABLED = ["张三", "李四", "王五", "赵六", "孙八"]


@pytest.fixture(scope="module")
def files(samba_ad: DomainController, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder 法务 whose file 合同.md only 法务部 may read, and 公告.md anyone signed in."""
    local = tmp_path_factory.mktemp("smb") / "text.md"
    local.write_text("合同正文\n", encoding="utf-8")
    smb_admin(samba_ad, "mkdir 法务", f'put "{local}" "法务/合同.md"', f'put "{local}" "公告.md"')
    only_legal = (
        "ACL:BUILTIN\\Administrators:ALLOWED/0x0/FULL",
        "ACL:CORP\\法务部:ALLOWED/0x0/READ",
    )
    smb_acl(samba_ad, "法务/合同.md", *only_legal)
    return "法务/合同.md"


@pytest.mark.parametrize("user", ENABLED)
def test_each_person_signs_in_over_smb(samba_ad: DomainController, files: str, user: str) -> None:
    assert smb_read(samba_ad, user, "公告.md") == "合同正文\n".encode()


def test_a_disabled_account_cannot_sign_in(samba_ad: DomainController, files: str) -> None:
    assert smb_read(samba_ad, "钱七", "公告.md") is None


@pytest.mark.parametrize(("user", "reads"), [("张三", True), ("李四", False), ("王五", False)])
def test_a_dacl_written_over_smb_is_enforced(
    samba_ad: DomainController, files: str, user: str, reads: bool
) -> None:
    assert (smb_read(samba_ad, user, files) is not None) is reads


def test_sids_belong_to_the_domain(samba_ad: DomainController) -> None:
    for name in ["张三", "法务部", "集团全员"]:
        assert samba_ad.sids[name].startswith(samba_ad.domain_sid + "-")
    assert len(set(samba_ad.sids.values())) == len(samba_ad.sids)


def test_two_domain_controllers_run_side_by_side(
    samba_ad: DomainController, files: str, tmp_path: Path
) -> None:
    """Each instance has its own address, folders and winbindd: a session on either works
    while both run (one shared /run/samba/winbindd would fail every session on one of them)."""
    other = support.start()
    try:
        assert other.address != samba_ad.address
        assert other.env["SAMBA_AD_DIR"] != samba_ad.env["SAMBA_AD_DIR"]
        assert other.domain_sid != samba_ad.domain_sid
        other.seed({"groups": [], "users": [{"name": "张三", "password": support.PASSWORD}]})
        local = tmp_path / "other.md"
        local.write_text("另一个域\n", encoding="utf-8")
        smb_admin(other, f'put "{local}" "公告.md"')
        assert smb_read(other, "张三", "公告.md") == "另一个域\n".encode()
        assert smb_read(samba_ad, "张三", "公告.md") == "合同正文\n".encode()
    finally:
        support.stop(other)
    assert smb_read(samba_ad, "张三", "公告.md") == "合同正文\n".encode()
