"""An API key's configuration entry (design.md §6): its name, hash, tenant, scope and
identity mode, refused at start when it cannot work; and the keys file that holds entries.

The ground floor, with settings (which reads the entries): imports nothing of the project but
the naming rules and the id shapes (pure patterns).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from retrieval_svc.id_shapes import shape_problem
from retrieval_svc.names import name_problem
from retrieval_svc.tenancy import DEFAULT_TENANT, check_tenant

# Casbin subjects that are not roles (design.md §4): ``user:<id>`` names a user and ``anyone``
# is held by every principal. A role that a caller or a key asserts can never be one of them,
# or asserting ``user:wang`` would act as wang. (The acl package re-exports these.)
ANYONE = "anyone"
USER_PREFIX = "user:"
# ``sid:S-1-…`` names a Windows security identifier (retrieval_svc.acl.sids): given to people
# only by the directory sync, written on documents only from a file's DACL.
SID_PREFIX = "sid:"


def reserved_prefix(role: str) -> str | None:
    """The reserved prefix (``user:``, ``sid:``) ``role`` begins with as a reader would see
    it — compatibility forms folded (NFKC: a fullwidth ``sid:``), white space at the start
    and, for ``sid:``, case ignored — else None."""
    folded = unicodedata.normalize("NFKC", role).lstrip()
    if folded.startswith(USER_PREFIX):
        return USER_PREFIX
    if folded[: len(SID_PREFIX)].casefold() == SID_PREFIX:
        return SID_PREFIX
    return None


def reserved_role(role: str) -> str | None:
    """Why ``role`` may not be asserted as a role (it names a user, or everyone), else None."""
    prefix = reserved_prefix(role)
    if prefix == USER_PREFIX:
        return f"{role!r} names a user ({USER_PREFIX}<id>), not a role"
    if role == ANYONE:
        return f"{ANYONE!r} is held by every principal and cannot be asserted"
    if prefix == SID_PREFIX:
        return f"{role!r} names a Windows SID ({SID_PREFIX}S-…): only the directory gives it"
    return None


# Keys that documentation, tutorials or lazy configuration tend to use.
_PLACEHOLDERS = ("", "changethis", "changeme", "secret", "password", "test", "dev", "your-api-key")
_PLACEHOLDER_HASHES = frozenset(hashlib.sha256(p.encode()).hexdigest() for p in _PLACEHOLDERS)


class IdentityMode(StrEnum):
    """Where a key's principal gets its roles."""

    CASBIN = "casbin"
    TRUSTED = "trusted"
    SIGNED = "signed"
    OIDC = "oidc"
    FIXED = "fixed"


class ApiKeyConfig(BaseModel):
    """One configured API key."""

    # Configuration errors must never echo a secret back into a log.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(DEFAULT_TENANT, min_length=1, max_length=128)
    knowledge_ids: tuple[str, ...] = ("*",)
    mode: IdentityMode = IdentityMode.CASBIN
    roles: tuple[str, ...] = ()
    token_secret: SecretStr | None = Field(None, min_length=32)  # HS256 wants >= 256 bits
    admin: bool = False  # may call operator endpoints (explain) for any principal of its tenant
    # A SCIM client's key (Okta, Entra ID, Keycloak…): provisions its tenant's users and groups
    # at /scim/v2, and nothing else.
    scim: bool = False
    # A user id that resolves to no one (design.md §17): served as anonymous (public chunks
    # only, marked in the log, audit and metrics), or refused with 403.
    unknown_user: Literal["public", "refuse"] = "public"
    # A request that states no identity at all: served as anonymous (public chunks only), or
    # refused with 403, so a Dify app whose binding is missing is seen on its first request.
    anonymous: Literal["public", "refuse"] = "public"
    # The shapes its callers' user ids take (email, uuid, directory_uid, regex:<pattern>); an
    # id in none of them is refused (400), so a typed name or a wrong variable fails loudly.
    # Empty: any id.
    user_id_shape: tuple[str, ...] = ()

    @field_validator("user_id_shape", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("user_id_shape")
    @classmethod
    def _known_shapes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for shape in value:
            if (problem := shape_problem(shape)) is not None:
                raise ValueError(problem)
        return value

    @field_validator("tenant")
    @classmethod
    def _index_name(cls, value: str) -> str:
        return check_tenant(value)

    @field_validator("sha256", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("sha256")
    @classmethod
    def _not_placeholder(cls, value: str) -> str:
        if value in _PLACEHOLDER_HASHES:
            raise ValueError("this is the hash of a placeholder key: generate a real one")
        return value

    @model_validator(mode="after")
    def _mode_has_what_it_needs(self) -> Self:
        # Refused at start, naming the key: at request time these would fail every request
        # (signed without a secret) or act anonymous without a word (fixed without roles).
        if self.mode is IdentityMode.SIGNED and self.token_secret is None:
            raise ValueError(
                f"API key {self.name!r} has mode signed but no token_secret: set one "
                "(`retrieval-svc new-key --mode signed` generates a strong one)"
            )
        for role in self.roles:
            if (why := reserved_role(role)) is not None:
                raise ValueError(f"API key {self.name!r}: role {why}")
            if (problem := name_problem("role", role)) is not None:  # (the name every store holds)
                raise ValueError(f"API key {self.name!r}: {problem}")
        if self.scim and self.admin:
            raise ValueError(
                f"API key {self.name!r} is both a SCIM client's and an admin's: give each its "
                "own key (a SCIM key provisions people, it never reads or administers)"
            )
        if self.mode is IdentityMode.FIXED and not self.roles:
            raise ValueError(
                f"API key {self.name!r} has mode fixed but no roles: set the roles it carries "
                "(`retrieval-svc new-key --mode fixed --roles 巡检员,…`)"
            )
        return self

    def may_read(self, knowledge_id: str) -> bool:
        """Whether this key is scoped to ``knowledge_id`` (``*`` patterns allowed)."""
        return any(fnmatchcase(knowledge_id, pattern) for pattern in self.knowledge_ids)


# The keys file (RSVC_API_KEYS_FILE): entries as JSON or YAML, read at start and on each
# change (retrieval_svc.auth.key_file).


def load_api_keys(path: Path) -> list[ApiKeyConfig]:
    """Read API key entries from a JSON or YAML file (a list, or ``{"keys": [...]}``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read API keys file {path}: {exc.strerror}") from exc
    return parse_api_keys(text, path)


def parse_api_keys(text: str, path: Path) -> list[ApiKeyConfig]:
    """The API key entries of ``text``, the content of the file at ``path`` (JSON by its
    suffix, else YAML)."""
    data: Any = _parsed(text, path)
    if isinstance(data, dict):
        data = data.get("keys", [])
    if not isinstance(data, list):
        raise ValueError(f"API keys file {path} must hold a list of keys or {{keys: [...]}}")
    return [_entry(entry, number, path) for number, entry in enumerate(data, start=1)]


def _entry(entry: Any, number: int, path: Path) -> ApiKeyConfig:
    """Entry ``number`` of the file at ``path``; a refusal names the file, the entry and each
    field it refuses (``sha256: …; tenants: …``), not a setting of the service's own."""
    try:
        return ApiKeyConfig.model_validate(entry)
    except ValidationError as exc:
        fields = "; ".join(
            ".".join(str(p) for p in error["loc"])
            + ": "
            + error["msg"].removeprefix("Value error, ")
            if error["loc"]
            else error["msg"].removeprefix("Value error, ")
            for error in exc.errors()
        )
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name:
            raise ValueError(f"API keys file {path}, entry {number} ({name}): {fields}") from None
        raise ValueError(f"API keys file {path}, entry {number}: {fields}") from None


def _parsed(text: str, path: Path) -> Any:
    """``text`` read as JSON (by the file's suffix) or YAML; ValueError naming the line."""
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        where, problem = (exc.lineno, exc.colno), exc.msg
        kind = "JSON"
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem, kind = str(getattr(exc, "problem", None) or exc), "YAML"
    raise ValueError(
        f"API keys file {path} is not valid {kind} (line {where[0]}, column {where[1]}): {problem}"
    )
