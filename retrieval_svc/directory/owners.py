"""What one directory sync decides in a tenant, read from the policy database: the grants it
gave before (under its name and every name it was ``renamed_from``), the other grants but
another directory's (a sync shares a role with another directory, never takes back that one's
members), and the roles it owned — then ``groups.plan``'s difference with what it read."""

from __future__ import annotations

from collections.abc import Iterable

from retrieval_svc.acl import directory_sids, grant_sources, owned
from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.grant_sources import directory as directory_source
from retrieval_svc.directory.groups import Directory, Limits, Plan, RoleMapping, plan


def planned(
    admin: PolicyAdmin,
    tenant: str,
    name: str,
    directory: Directory,
    roles: RoleMapping,
    limits: Limits,
    renamed_from: Iterable[str] = (),
) -> tuple[Plan, dict[str, str]]:
    """The changes the sync ``name`` makes in ``tenant`` after reading ``directory``, and the
    roles it owned before (role → owner); raises ``RemovalLimit`` past ``limits``."""
    names = [name, *(n for n in renamed_from if n != name)]
    mine = {f"ldap:{n}" for n in names}
    sourced = admin.sourced(tenant)
    held = {g for g, by in sourced.items() if mine & by}
    others = [
        g
        for g in admin.store.rules().grouping
        if not any(directory_source(s) and s not in mine for s in sourced.get(tuple(g), ()))
    ]
    before = {r: o for n in names for r, o in admin.owned_roles(tenant, n).items()}
    try:
        with admin.store.engine().connect() as conn:
            had = {s for n in mine for s in directory_sids.rows_in(conn, tenant, n)}
    except Exception as exc:
        raise admin.store._failure(exc) from exc
    had.discard(directory_sids.KNOWN)
    changes = plan(directory, roles, tenant, others, owned_before=before, limits=limits,
                   held=held, sids_before=had)  # fmt: skip
    return changes, before


def unclaimed(admin: PolicyAdmin, tenant: str, name: str, roles: Iterable[str]) -> list[str]:
    """The other syncs giving grants of ``roles`` in ``tenant`` that have not run since the sync
    ``name`` first did: an old name of it (``renamed_from`` takes over what it gave) or a sync
    stopped — their grants are given by no sync that runs. Raises PolicyError."""
    wanted = set(roles)
    try:
        with admin.store.engine().connect() as conn:
            runs = owned.runs_in(conn, tenant)
            sourced = grant_sources.sourced_in(conn, tenant)
    except Exception as exc:
        raise admin.store._failure(exc) from exc
    if name not in runs:
        return []
    givers = {
        s.removeprefix("ldap:")
        for line, by in sourced.items()
        if line[1] in wanted
        for s in by
        if grant_sources.directory(s)
    }
    began = runs[name][0]
    return sorted(g for g in givers - {name} if g not in runs or runs[g][1] < began)
