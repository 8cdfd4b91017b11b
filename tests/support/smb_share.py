"""Files and access lists written into the test domain controller's share over SMB, as the
domain's administrator would — the DACL as raw bytes through SET_INFO, in exactly the order
given (``smbcacls`` re-sorts what it writes, so a non-canonical DACL needs this) — and each
person's token as the directory computes it (``tokenGroups``); and a policy database the
real ``policy sync-ldap`` wrote, as the indexer and the service read it in production."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from indexer.permissions.security_descriptor import (
    SE_DACL_PRESENT,
    SE_SELF_RELATIVE,
    Ace,
    SecurityDescriptor,
    security_descriptor_bytes,
    sid_from_bytes,
)
from tests.support.samba_ad import DomainController, sync_body

READ = 0x120089  # FILE_GENERIC_READ
FULL = 0x1F01FF  # FILE_ALL_ACCESS
INHERIT = 0x03  # OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
SE_DACL_PROTECTED = 0x1000
ADMINISTRATORS = "S-1-5-32-544"
WRITE_DAC = 0x00040000
DACL_SECURITY_INFORMATION = 0x4


def allow(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(0x00, flags, mask, sid)


def deny(sid: str, mask: int = READ, flags: int = 0) -> Ace:
    return Ace(0x01, flags, mask, sid)


class Share:
    """The DC's share, as its administrator reaches it over SMB."""

    def __init__(self, dc: DomainController, name: str | None = None) -> None:
        self.dc = dc
        self.name = name or dc.share
        self.cache: dict[str, Any] = {}

    def unc(self, path: str) -> str:
        return "\\".join((f"\\\\{self.dc.address}", self.name, *path.split("/")))

    def kwargs(self, user: str = "Administrator", password: str | None = None) -> dict[str, Any]:
        return {
            "username": f"{self.dc.env['SAMBA_AD_DOMAIN']}\\{user}",
            "password": password or self.dc.admin_password,
            "connection_cache": self.cache,
            "auth_protocol": "ntlm",
        }

    def mkdir(self, path: str) -> None:
        import smbclient

        smbclient.makedirs(self.unc(path), exist_ok=True, **self.kwargs())

    def write(self, path: str, text: str) -> None:
        import smbclient

        with smbclient.open_file(self.unc(path), "w", encoding="utf-8", **self.kwargs()) as f:
            f.write(text)

    def remove(self, path: str) -> None:
        import smbclient

        smbclient.remove(self.unc(path), **self.kwargs())

    def rename(self, path: str, to: str) -> None:
        import smbclient

        smbclient.rename(self.unc(path), self.unc(to), **self.kwargs())

    def set_dacl(self, path: str, *aces: Ace, protected: bool = True) -> None:
        """Replace the DACL of ``path`` with ``aces``, in this order, byte for byte."""
        from smbclient._io import SMBFileTransaction, SMBRawIO
        from smbprotocol.open import InfoType, SMB2SetInfoRequest, SMB2SetInfoResponse

        control = SE_DACL_PRESENT | SE_SELF_RELATIVE | (SE_DACL_PROTECTED if protected else 0)
        blob = security_descriptor_bytes(SecurityDescriptor(None, None, tuple(aces), control))
        raw = SMBRawIO(self.unc(path), mode="r", share_access="rwd", desired_access=WRITE_DAC,
                       **self.kwargs())  # fmt: skip
        request = SMB2SetInfoRequest()
        request["info_type"] = InfoType.SMB2_0_INFO_SECURITY
        # (protection travels in the descriptor's control bits, SE_DACL_PROTECTED)
        request["additional_information"] = DACL_SECURITY_INFORMATION
        request["buffer"] = blob

        def receive(sent: Any) -> Any:
            response = raw.fd.connection.receive(sent)
            done = SMB2SetInfoResponse()
            done.unpack(response["data"].get_value())
            return done

        with SMBFileTransaction(raw) as transaction:
            request["file_id"] = raw.fd.file_id
            transaction += (request, receive)


def token_sids(dc: DomainController, user: str) -> set[str]:
    """The SIDs the directory puts in ``user``'s token: their own and ``tokenGroups`` (every
    group, transitively, their primary group included), as a logon computes them."""
    import ldap3

    server = ldap3.Server(dc.ldap_url)
    conn = ldap3.Connection(server, dc.admin_dn, dc.admin_password, auto_bind=True)
    try:  # (not ``with``: a connection bound before it is left bound, its socket open)
        conn.search(dc.dns[user], "(objectClass=user)", ldap3.BASE, attributes=["tokenGroups"])
        (entry,) = conn.response
        groups = entry["raw_attributes"].get("tokenGroups", [])
    finally:
        conn.unbind()
    return {dc.sids[user], *(sid_from_bytes(raw, 0, len(raw))[0] for raw in groups)}


def synced_policy(
    dc: DomainController, db: str, folder: Path, groups_base: str, tenant: str
) -> None:
    """``retrieval-svc policy sync-ldap`` against the domain into ``db``, as an administrator
    runs it (people in ``CN=Users``; groups below ``groups_base``; CN=Builtin by default)."""
    from typer.testing import CliRunner

    from retrieval_svc.cli import app

    body = sync_body(dc, tenant, groups_base, {"法务部": ["法务"]}, max_removed_share=1)
    path = folder / f"sync-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    env = {"TEST_AD_PASSWORD": dc.admin_password, "RSVC_LANG": "en"}
    done = CliRunner().invoke(app, ["policy", "--db", db, "sync-ldap", str(path)], env=env)
    assert done.exit_code == 0, done.output
