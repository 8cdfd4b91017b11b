"""The sync file of ``retrieval-svc policy sync-ldap`` (YAML): which directory, which users and
groups, how their ids compare, and which groups give which roles — read and checked before any
connection is made (docs/permissions.md#directory-groups-ldap)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from retrieval_svc.acl.id_forms import Kind, attribute_kind
from retrieval_svc.acl.identities import PERSON
from retrieval_svc.config_words import detail
from retrieval_svc.directory.groups import DirectoryError, RoleMapping, mapping
from retrieval_svc.tenancy import check_tenant


class _Users(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    filter: str = "(objectClass=inetOrgPerson)"
    # sAMAccountName or userPrincipalName in Active Directory; its ids are compared as the
    # directory compares that attribute (id_forms.attribute_kind: mail as e-mail addresses).
    id_attribute: str = "uid"
    # Other ids a person arrives with (Dify's user, an OIDC sub or e-mail): mail,
    # userPrincipalName… each resolves to the person (docs/permissions.md, identity resolution).
    aliases: list[str] = Field(default_factory=list, max_length=10)


class _Groups(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    filter: str = "(|(objectClass=groupOfNames)(objectClass=group))"
    name_attribute: str = "cn"
    # member: each group lists its members' DNs (OpenLDAP groupOfNames, AD); memberOf: each
    # user and group lists the groups it is in (the memberOf overlay, AD).
    membership: Literal["member", "memberOf"] = "member"
    # Active Directory: also read the domain's builtin groups (CN=Builtin: BUILTIN\\Users,
    # BUILTIN\\Administrators…) for their SIDs alone, so a file's deny naming one refuses
    # exactly their members; false leaves them unknown (such a deny refuses every person).
    builtin: bool = True


class LdapSync(BaseModel):
    """A sync file (YAML); see docs/permissions.md#directory-groups-ldap."""

    model_config = ConfigDict(extra="forbid")

    tenant: str
    # The sync's name: what owns the roles it gives (two directories feeding one tenant need
    # two names), in the history and in the console's refusal of a hand grant.
    name: str = Field(default="sync-ldap", min_length=1, max_length=64, pattern=r"^[\w.:-]+$")
    # The names this sync had before (``name`` changed in the file): it takes over what each
    # gave and owned, in its first run's transaction, so nothing stays given by a name no sync
    # runs as.
    renamed_from: list[
        Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[\w.:-]+$")]
    ] = Field(default_factory=list, max_length=10)
    url: str = Field(pattern=r"^ldaps?://")
    start_tls: bool = False
    ca_file: Path | None = None
    bind_dn: str | None = None
    bind_password_env: str | None = None
    users: _Users
    groups: _Groups
    # Active Directory's shapes (SIDs, primary groups, ranged members, disabled accounts:
    # ``ad.py``); None: detected from the root DSE.
    ad: bool | None = None
    roles: dict[str, list[str]] = Field(default_factory=dict)
    all_groups: bool = False
    page_size: int = Field(default=500, ge=1, le=10_000)
    timeout_s: float = Field(default=30, gt=0)
    max_removed_share: float = Field(default=0.5, ge=0, le=1)
    removal_floor: int = Field(default=1, ge=0)  # removing this many is always allowed

    @field_validator("renamed_from", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def role_mapping(self) -> RoleMapping:
        if not self.roles and not self.all_groups:
            raise DirectoryError("the sync maps no group to a role: add 'roles' or 'all_groups'")
        return mapping(self.roles, self.all_groups)


def load_sync(path: Path) -> LdapSync:
    """A sync file, checked; raises DirectoryError."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DirectoryError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = getattr(exc, "problem", None) or exc
        raise DirectoryError(
            f"{path} is not valid YAML (line {line}, column {column}): {problem}"
        ) from None
    try:
        sync = LdapSync.model_validate(data)
        check_tenant(sync.tenant)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {detail(e, 'en')}"
            for e in exc.errors()[:5]
        )
        raise DirectoryError(f"{path}: {problems}") from None
    except ValueError as exc:
        raise DirectoryError(f"{path}: tenant: {exc}") from None
    return sync


def id_kinds(sync: LdapSync) -> dict[str, Kind]:
    """How the directory compares each id the sync reads, by the attribute its configuration
    reads it from (``id_forms.attribute_kind``): the users' own ids (``id_attribute``) and
    each alias."""
    kinds = {a: attribute_kind(a) for a in sync.users.aliases}
    kinds[PERSON] = attribute_kind(sync.users.id_attribute)
    return kinds
