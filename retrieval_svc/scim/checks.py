"""What a SCIM resource must be before it is stored: a ``userName`` or group ``displayName`` a
policy can name, ids an alias column holds, and only strings with a UTF-8 form — refused one
resource at a time (400, ``invalidValue``), before anything is written."""

from __future__ import annotations

from typing import Any

from scim2_models import InvalidValueException, Resource

from retrieval_svc.acl import identities
from retrieval_svc.acl.admin import checked_role, checked_user
from retrieval_svc.acl.id_forms import SCIM_KINDS, Kind
from retrieval_svc.acl.policy_store import PolicyError
from retrieval_svc.scim.grants import GROUP, USER, is_a, user_ids

SCIM_IDS: dict[str, Kind] = {identities.PERSON: SCIM_KINDS["userName"], **SCIM_KINDS}


def check(resource: Resource[Any], tenant: str) -> None:
    """Refuse what cannot become a grant or be stored, before anything is: a ``userName`` or
    group ``displayName`` no policy can name, an e-mail or ``externalId`` no alias column
    holds (a control character, too long as compared), any value with a lone surrogate (no
    UTF-8 form: the database would refuse the whole write). One resource, one refusal naming
    the attribute; every other resource is untouched."""
    try:
        fields: Any = resource
        if is_a(resource, USER) and getattr(fields, "user_name", None) is not None:
            checked_user(fields.user_name)
            name, ids = user_ids(resource.model_dump(mode="json"))
            _, problems = identities.entries_of(tenant, "scim", name or "", ids, SCIM_IDS)
            if problems:
                raise PolicyError(problems[0])
        if is_a(resource, GROUP) and getattr(fields, "display_name", None) is not None:
            checked_role("group displayName", fields.display_name)
        if (where := unencodable(resource.model_dump(mode="json"))) is not None:
            raise PolicyError(f"{where} holds a lone surrogate (not UTF-8): it cannot be stored")
    except PolicyError as exc:
        raise InvalidValueException(detail=str(exc)) from None


def unencodable(value: Any, path: str = "") -> str | None:
    """Where in a resource's JSON a string has no UTF-8 form, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "a value"
        return None
    if isinstance(value, dict):
        pairs: Any = value.items()
    elif isinstance(value, list):
        pairs = enumerate(value)
    else:
        return None
    for key, inner in pairs:
        if (found := unencodable(inner, f"{path}.{key}" if path else str(key))) is not None:
            return found
    return None
