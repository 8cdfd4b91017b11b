"""Create a test domain's people and groups with Samba's own Python API (what ``samba-tool``
runs), in one process instead of one ``samba-tool`` start per object.

Run by the system Python that carries Samba's bindings (``/usr/bin/python3``), on the DC's
machine: ``python3 samba_ad_seed.py SMB_CONF < spec.json``. It prints one JSON object: every
user's and group's DN and SID. The spec (see ``tests.support.samba_ad.SPEC``):

    {"groups": [{"name": ..., "members": [user or group names, or "<SID=S-...>"]}],
     "users": [{"name": ..., "password": ..., "mail": ..., "disabled": bool,
                "primary_group": group name or null}]}

Groups are created first, users next, then memberships in the spec's order (a group may
name a group created after it), then primary groups and disabled accounts.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ldb  # type: ignore[import-not-found]
from samba.auth import system_session  # type: ignore[import-not-found]
from samba.dcerpc import security  # type: ignore[import-not-found]
from samba.ndr import ndr_unpack  # type: ignore[import-not-found]
from samba.param import LoadParm  # type: ignore[import-not-found]
from samba.samdb import SamDB  # type: ignore[import-not-found]


def _find(samdb: Any, name: str) -> Any:
    found = samdb.search(
        base=samdb.domain_dn(),
        scope=ldb.SCOPE_SUBTREE,
        expression=f"(sAMAccountName={ldb.binary_encode(name)})",
        attrs=["objectSid"],
    )
    if len(found) != 1:
        raise SystemExit(f"seed: {name!r} not found once ({len(found)})")
    return found[0]


def _foreign(samdb: Any, sid: str) -> str:
    """The member value naming ``sid``: its foreign security principal's DN where one exists
    (provisioning makes some, such as Authenticated Users'), else ``<SID=…>`` (the server then
    makes one, as a Windows DC does)."""
    found = samdb.search(
        base=f"CN=ForeignSecurityPrincipals,{samdb.domain_dn()}",
        scope=ldb.SCOPE_ONELEVEL,
        expression=f"(cn={ldb.binary_encode(sid)})",
        attrs=[],
    )
    return str(found[0].dn) if len(found) == 1 else f"<SID={sid}>"


def main() -> None:
    lp = LoadParm()
    lp.load(sys.argv[1])
    samdb = SamDB(url=lp.private_path("sam.ldb"), session_info=system_session(), lp=lp)
    spec = json.load(sys.stdin)
    for group in spec["groups"]:
        samdb.newgroup(group["name"])
    for user in spec["users"]:
        samdb.newuser(
            user["name"],
            user["password"],
            mailaddress=user.get("mail"),
        )
    for group in spec["groups"]:
        dn = _find(samdb, group["name"]).dn
        for member in group.get("members", []):
            target = (
                _foreign(samdb, member[5:-1])
                if member.startswith("<SID=")
                else (str(_find(samdb, member).dn))
            )
            message = ldb.Message(dn)
            message["member"] = ldb.MessageElement(target, ldb.FLAG_MOD_ADD, "member")
            samdb.modify(message)
    for user in spec["users"]:
        entry = _find(samdb, user["name"])
        if user.get("primary_group"):
            group = _find(samdb, user["primary_group"])
            rid = str(ndr_unpack(security.dom_sid, group["objectSid"][0])).rsplit("-", 1)[1]
            message = ldb.Message(entry.dn)
            message["primaryGroupID"] = ldb.MessageElement(
                rid, ldb.FLAG_MOD_REPLACE, "primaryGroupID"
            )
            samdb.modify(message)
        if user.get("disabled"):
            samdb.disable_account(f"(sAMAccountName={ldb.binary_encode(user['name'])})")
    out: dict[str, dict[str, str]] = {}
    for kind in ("users", "groups"):
        for item in spec[kind]:
            entry = _find(samdb, item["name"])
            sid = ndr_unpack(security.dom_sid, entry["objectSid"][0])
            out[item["name"]] = {"dn": str(entry.dn), "sid": str(sid)}
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
