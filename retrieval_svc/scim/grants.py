"""What a tenant's SCIM resources mean for the policy: the ids a user is known by, the role
grants its groups imply, and one write's grant changes reconciled with what its SCIM key gives
in the policy database (``grant_sources``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scim2_models import Resource

from retrieval_svc.acl.changes import Change
from retrieval_svc.acl.policy_store import user_subject

Grant = tuple[str, str, str]
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"


def is_a(resource: Resource[Any], schema: str) -> bool:
    """Whether ``resource`` is of the core schema ``schema`` (the provider builds its models
    from the published schemas, so they are not scim2-models' own User and Group classes)."""
    return schema in (resource.schemas or [])


def user_ids(body: Mapping[str, Any] | None) -> tuple[str | None, dict[str, list[str]]]:
    """A SCIM user's ``userName`` and the other ids it may arrive with (every ``emails``
    value, ``externalId``), from its stored JSON."""
    if not body:
        return None, {}
    emails = [str(e.get("value")) for e in body.get("emails") or () if isinstance(e, dict)]
    external = [str(body["externalId"])] if body.get("externalId") else []
    name = body.get("userName")
    return (str(name) if name else None), {"emails": emails, "externalId": external}


RoleMap = Mapping[str, tuple[str, ...]]


def grants_of(
    resources: list[Resource[Any]], tenant: str, roles: RoleMap | None = None
) -> set[Grant]:
    """The ``g`` lines the tenant's SCIM groups imply: each active member user, directly or
    through nested groups, holds the roles the group gives — those ``roles`` maps its
    ``displayName`` to, or (no mapping for the tenant) the role of that name."""
    users: dict[str, str] = {}  # id → user:<userName>, active users only
    groups: dict[str, Any] = {}
    for r in resources:
        schemas = r.schemas or ()
        if USER in schemas and r.id:
            user: Any = r
            if user.active is not False and user.user_name:
                users[r.id] = user_subject(str(user.user_name))
        elif GROUP in schemas and r.id:
            groups[r.id] = r
    grants: set[Grant] = set()
    for group in groups.values():
        if not group.display_name:
            continue
        given = (group.display_name,) if roles is None else roles.get(group.display_name, ())
        if not given:
            continue
        holders: set[str] = set()
        seen: set[str] = set()
        todo = [m.value for m in group.members or () if m.value]
        while todo:
            member = todo.pop()
            if member in seen:
                continue
            seen.add(member)
            if member in groups:  # a nested group passes its members on
                todo.extend(m.value for m in groups[member].members or () if m.value)
            elif (subject := users.get(member)) is not None:
                holders.add(subject)
        grants.update((subject, role, tenant) for subject in holders for role in given)
    return grants


def reconciled(
    conn: Any, tenant: str, source: str, before: set[Grant], after: set[Grant]
) -> list[Change]:
    """The grant changes of one write by the SCIM key ``source`` (``scim:<key>``), against what
    that key gives in the policy (``grant_sources``), not only against memory: a grant it gave
    that went missing is given again. Whether it may give each is the owner model's
    (``owners.judge``, when the changes are applied): a new grant of a role a directory sync
    owns is refused naming the sync; one the key gave before the sync owned the role is left to
    the sync, not given again."""
    from retrieval_svc.acl import grant_sources, owned

    taken = owned.owned_in(conn, tenant)
    given = {g for g in grant_sources.held_in(conn, tenant, source) if len(g) == 3}
    changes = [Change("remove", "g", g) for g in sorted((before | given) - after)]
    changes += [
        Change("add", "g", g) for g in sorted(after - given) if g not in before or g[1] not in taken
    ]
    return changes
