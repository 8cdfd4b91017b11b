"""A real Active Directory domain controller for tests: Samba's AD DC (``scripts/samba-ad.sh``)
on a loopback address of its own, with the people and groups a company's domain holds.

``running_dc()`` starts one, fills it (``SPEC``: Chinese names, a group nested three deep, a
user whose only membership is their primary group, a user whose primary group is not Domain
Users, a disabled account, foreign security principals — a well-known SID and one from a
domain nobody knows) and stops it afterwards; the ``samba_ad`` fixture in
tests/integration/conftest.py holds one per session. A DC that cannot start fails the tests
that need it, never a skip.

The oracle for what a person may read is the server itself: ``smb_read(dc, user, path)`` opens
the file over SMB as that user with ``smbclient``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "samba-ad.sh"
SEED = Path(__file__).with_name("samba_ad_seed.py")
# Samba's bindings live in the distribution's Python, not in the project's virtualenv.
SYSTEM_PYTHON = "/usr/bin/python3"

PASSWORD = "Test-Passw0rd-1"
# A SID from a domain this one does not know (a trusted forest's user, say).
FOREIGN_SID = "S-1-5-21-1000-2000-3000-1104"
AUTHENTICATED_USERS = "S-1-5-11"

# Groups: 集团全员 ⊃ 华东区 ⊃ 上海办公室 ∋ 王五 (nested three deep); 法务部 holds a foreign
# principal nobody here knows; 公告读者 holds Authenticated Users (every person).
SPEC: dict[str, list[dict[str, object]]] = {
    "groups": [
        {"name": "法务部", "members": ["张三", "钱七", f"<SID={FOREIGN_SID}>"]},
        {"name": "财务部", "members": ["李四", "孙八"]},
        {"name": "集团全员", "members": ["华东区"]},
        {"name": "华东区", "members": ["上海办公室"]},
        {"name": "上海办公室", "members": ["王五"]},
        {"name": "公告读者", "members": [f"<SID={AUTHENTICATED_USERS}>"]},
    ],
    "users": [
        {"name": "张三", "mail": "zhangsan@corp.example.org"},
        {"name": "李四", "mail": "lisi@corp.example.org"},
        {"name": "王五", "mail": "wangwu@corp.example.org"},
        # Only in Domain Users, through primaryGroupID (no group lists him in `member`).
        {"name": "赵六", "mail": "zhaoliu@corp.example.org"},
        {"name": "钱七", "mail": "qianqi@corp.example.org", "disabled": True},
        # Primary group 财务部, which holds him only through primaryGroupID (AD moves the old
        # primary group, Domain Users, into its member list).
        {"name": "孙八", "mail": "sunba@corp.example.org", "primary_group": "财务部"},
    ],
}
for _user in SPEC["users"]:
    _user["password"] = PASSWORD


@dataclass
class DomainController:
    """What ``scripts/samba-ad.sh start`` printed, and the SIDs of what ``SPEC`` created."""

    env: dict[str, str]
    sids: dict[str, str] = field(default_factory=dict)
    dns: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.env["SAMBA_AD_ADDRESS"]

    @property
    def base_dn(self) -> str:
        return self.env["SAMBA_AD_BASE_DN"]

    @property
    def domain_sid(self) -> str:
        return self.env["SAMBA_AD_DOMAIN_SID"]

    @property
    def admin_dn(self) -> str:
        return self.env["SAMBA_AD_ADMIN_DN"]

    @property
    def admin_password(self) -> str:
        return self.env["SAMBA_AD_ADMIN_PASSWORD"]

    @property
    def ldap_url(self) -> str:
        return self.env["SAMBA_AD_LDAP_URL"]

    @property
    def ldaps_url(self) -> str:
        return self.env["SAMBA_AD_LDAPS_URL"]

    @property
    def ca(self) -> str:
        return self.env["SAMBA_AD_CA"]

    @property
    def share(self) -> str:
        return self.env["SAMBA_AD_SHARE"]

    @property
    def share2(self) -> str:
        """A second share, alike, for tests that set a share ACL (``share_acl``)."""
        return self.env["SAMBA_AD_SHARE2"]

    @property
    def dfs_share(self) -> str:
        """A third share, a DFS root (``msdfs root = yes``), for tests that make DFS links."""
        return self.env["SAMBA_AD_SHARE3"]

    @property
    def smb_conf(self) -> str:
        return self.env["SAMBA_AD_SMB_CONF"]

    def samba_tool(self, *args: str) -> str:
        """``samba-tool ARGS`` on this DC's database (local, as on the DC itself)."""
        done = subprocess.run(
            ["samba-tool", *args, "-s", self.smb_conf],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"samba-tool {' '.join(args)}: {done.stderr}")
        return done.stdout

    def seed(self, spec: dict[str, list[dict[str, object]]]) -> dict[str, dict[str, str]]:
        """Create ``spec``'s groups and users (tests/support/samba_ad_seed.py); their DNs and
        SIDs by name."""
        done = subprocess.run(
            [SYSTEM_PYTHON, str(SEED), self.smb_conf],
            input=json.dumps(spec, ensure_ascii=False), capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"seeding the domain failed: {done.stderr}")
        made: dict[str, dict[str, str]] = json.loads(done.stdout)
        for name, item in made.items():
            self.sids[name] = item["sid"]
            self.dns[name] = item["dn"]
        return made


def _servers_env() -> dict[str, str]:
    from tests.support import SERVERS_DIR

    return {**os.environ, **({"RSVC_SERVERS_DIR": SERVERS_DIR} if SERVERS_DIR else {})}


def start() -> DomainController:
    """Provision and start a DC (scripts/samba-ad.sh start); RuntimeError with its log if not."""
    done = subprocess.run(
        [str(SCRIPT), "start"], capture_output=True, text=True, timeout=900, check=False,
        env=_servers_env(),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"could not start Samba's AD DC with {SCRIPT}:\n{done.stderr}")
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return DomainController(env)


def stop(dc: DomainController) -> None:
    subprocess.run(
        [str(SCRIPT), "stop", dc.address], capture_output=True, timeout=120, check=False,
        env=_servers_env(),
    )  # fmt: skip


@contextlib.contextmanager
def running_dc(
    spec: dict[str, list[dict[str, object]]] | None = None,
) -> Iterator[DomainController]:
    """A started DC filled with ``spec`` (default ``SPEC``), stopped and removed afterwards."""
    dc = start()
    try:
        dc.seed(SPEC if spec is None else spec)
        yield dc
    finally:
        stop(dc)


def smb_read(
    dc: DomainController, user: str, path: str, password: str = PASSWORD, share: str | None = None
) -> bytes | None:
    """The file at ``path`` in the DC's share (or ``share``) as ``user`` reads it over SMB, or
    None when the server refuses (access denied, no such file, a disabled account)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "out"
        done = subprocess.run(
            [
                "smbclient", "-s", dc.smb_conf, f"//{dc.address}/{share or dc.share}",
                "-U", f"{dc.env['SAMBA_AD_DOMAIN']}\\{user}%{password}",
                "-c", f'get "{path}" "{local}"',
            ],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not local.exists():
            return None
        return local.read_bytes()


def smb_admin(dc: DomainController, *commands: str) -> None:
    """Run ``smbclient`` commands (``mkdir 法务``, ``put LOCAL 法务/合同.md``…) in the share as
    the domain's administrator; RuntimeError if one fails."""
    done = subprocess.run(
        [
            "smbclient", "-s", dc.smb_conf, f"//{dc.address}/{dc.share}",
            "-U", f"Administrator%{dc.admin_password}", "-E", "-c", "; ".join(commands),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0 or "NT_STATUS_" in done.stderr + done.stdout:
        raise RuntimeError(f"smbclient {commands}: {done.stdout}{done.stderr}")


def smb_acl(dc: DomainController, path: str, *aces: str) -> None:
    """Replace the DACL of ``path`` in the share over SMB (``smbcacls --set``, as Explorer's
    security tab does): ACEs such as ``ACL:CORP\\法务部:ALLOWED/0x0/READ``."""
    done = subprocess.run(
        [
            "smbcacls", "-s", dc.smb_conf, f"//{dc.address}/{dc.share}", path,
            "-U", f"Administrator%{dc.admin_password}", "--set", ",".join(aces),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"smbcacls {path} {aces}: {done.stdout}{done.stderr}")


def share_acl(dc: DomainController, share: str, *aces: str) -> None:
    """Replace the share's own ACL — its *share permissions*, as Computer Management's Share
    Permissions tab sets them — with ``aces`` (``sharesec`` syntax: ``S-1-…:ALLOWED/0x0/READ``,
    ``S-1-…:DENIED/0x0/FULL``); none: remove it (Samba then answers Everyone full control)."""
    command = ["sharesec", "-s", dc.smb_conf, share]
    command += ["--replace", ",".join(aces)] if aces else ["--delete"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and (aces or "NT_STATUS_NOT_FOUND" not in done.stdout + done.stderr):
        raise RuntimeError(f"sharesec {share} {aces}: {done.stdout}{done.stderr}")


def sync_body(
    dc: DomainController,
    tenant: str,
    groups_base: str,
    roles: dict[str, list[str]],
    aliases: tuple[str, ...] = ("mail",),
    **more: Any,
) -> dict[str, Any]:
    """A ``sync-ldap`` file for this domain as an administrator writes it: people in
    ``CN=Users`` (computers left out) by ``sAMAccountName``, groups below ``groups_base``, the
    administrator's password from ``TEST_AD_PASSWORD``."""
    return {
        "tenant": tenant,
        "url": dc.ldaps_url,
        "ca_file": dc.ca,
        "bind_dn": dc.admin_dn,
        "bind_password_env": "TEST_AD_PASSWORD",
        "users": {
            "base": f"CN=Users,{dc.base_dn}",
            "filter": "(&(objectClass=user)(!(objectClass=computer)))",
            "id_attribute": "sAMAccountName",
            "aliases": list(aliases),
        },
        "groups": {"base": groups_base, "filter": "(objectClass=group)"},
        "roles": roles,
        **more,
    }
