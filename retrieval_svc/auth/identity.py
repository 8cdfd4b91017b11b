"""From an API key and the caller's claims to a principal (design.md §4, §6).

| mode      | user id from              | roles from                                  |
|-----------|---------------------------|---------------------------------------------|
| `casbin`  | the claim `user_id`       | Casbin only; a role claim is refused        |
| `trusted` | the claim `user_id`       | the claimed roles + Casbin                  |
| `signed`  | the token's `sub`         | the token's `roles` + Casbin; plain claims refused |
| `oidc`    | the OIDC token's user claim | its roles claim + Casbin; plain claims refused |
| `fixed`   | none                      | the key's roles; caller claims are ignored  |

Every role set is expanded through the Casbin role hierarchy. The user id is resolved to the
person it names (``AccessControl.identify``: the id itself, or one of the person's other ids —
an e-mail, a UPN, a mapped Dify id); one that names no one gets no roles of a user, is marked
on the principal, and is refused where the key says ``unknown_user: refuse``. A request with
no identity at all is anonymous (public only), or refused where the key says ``anonymous:
refuse``. An identity value that is a variable Dify left unresolved is refused (400) on every
key; a plain user id in none of the key's ``user_id_shape`` shapes too.

An asserted role (a claim, a token's roles, an OIDC groups claim, a fixed key's roles) can
never name a user (``user:<id>``) or ``anyone``: in a token that is a 401 (the token is
invalid), in a plain claim a 403, in a key's configuration a start-up error. A claim a mode
does not accept is refused (403) rather than silently dropped, so a misconfigured Chatflow is
noticed; an invalid or expired token is a 401, never a silent downgrade to anonymous.
"""

from __future__ import annotations

from dataclasses import dataclass

import jwt

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.values import RoleValueError, parse_roles
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode
from retrieval_svc.auth.oidc import OidcVerifier, VerifiedUser
from retrieval_svc.auth.principal import Principal
from retrieval_svc.errors import (
    AuthorizationFailed,
    InvalidPrincipalToken,
    InvalidRequest,
    UnknownPrincipal,
)
from retrieval_svc.id_shapes import fits, template_problem
from retrieval_svc.key_entry import reserved_role

MAX_USER_ID_LENGTH = 256
TOKEN_LEEWAY_S = 5


@dataclass(frozen=True, slots=True)
class Claims:
    """What the caller says about the end user; each part optional."""

    user_id: str | None = None
    roles: tuple[str, ...] | None = None
    token: str | None = None
    # Where the user id is in the caller's request (``metadata_condition.conditions[0].value``),
    # for an error that blames it.
    user_id_path: str = "user_id"

    @property
    def empty(self) -> bool:
        """Whether the caller claimed nothing."""
        return self.user_id is None and self.roles is None and self.token is None


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """The verified content of a principal token."""

    subject: str | None
    roles: tuple[str, ...]


def verify_token(token: str, key: ApiKeyConfig) -> TokenClaims:
    """Verify an HS256 principal token minted for ``key``'s tenant; raise 401 otherwise."""
    assert key.token_secret is not None  # ApiKeyConfig refuses a signed key without one
    try:
        payload = jwt.decode(
            token,
            key.token_secret.get_secret_value(),
            algorithms=["HS256"],
            options={"require": ["exp", "tenant"]},
            leeway=TOKEN_LEEWAY_S,
        )
    except jwt.ExpiredSignatureError as exc:
        raise InvalidPrincipalToken("the principal token has expired") from exc
    except jwt.PyJWTError as exc:
        raise InvalidPrincipalToken(f"the principal token is invalid: {exc}") from exc
    if payload.get("tenant") != key.tenant:
        raise InvalidPrincipalToken("the principal token was minted for another tenant")
    subject = payload.get("sub")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise InvalidPrincipalToken("the principal token's sub must be a non-empty string")
    try:
        roles = tuple(parse_roles(payload.get("roles")))
    except RoleValueError as exc:
        raise InvalidPrincipalToken(f"the principal token's roles are invalid: {exc}") from exc
    return TokenClaims(subject=subject, roles=roles)


def make_claims(user_id: str | None, roles: object, token: str | None, *, path: str) -> Claims:
    """Claims from a request's loose parts (empty strings mean "not sent"); roles may be a
    list, JSON-array text or comma text. ``path`` names the request field for errors."""
    parsed = None
    for field, value in (("user_id", user_id), ("roles", roles), ("token", token)):
        refuse_template(f"{path}.{field}", field, value)
    if roles is not None and roles != "":
        try:
            parsed = tuple(parse_roles(roles))
        except RoleValueError as exc:
            raise InvalidRequest(f"{path}.roles: {exc}", path=f"{path}.roles") from None
    return Claims(
        user_id=user_id or None, roles=parsed, token=token or None, user_id_path=f"{path}.user_id"
    )


def refuse_template(where: str, name: str, value: object) -> None:
    """Refuse (400) an identity value that is a variable Dify left unresolved (a template, or
    a missing variable's selector): read as an id it would be a stranger, public only."""
    for item in value if isinstance(value, list | tuple) else (value,):
        if not isinstance(item, str) or template_problem(item) is None:
            continue
        shown = item.strip()[:60]
        raise InvalidRequest(
            f"{where}: {name!r} is an unresolved Dify variable ({shown!r}), not an identity: "
            "bind it to a variable that exists, as Dify's editor inserts it, {{#sys.user_id#}} "
            "(docs/dify.md)",
            path=where,
            reason="template_identity",
        )


def _may_be_anonymous(key: ApiKeyConfig) -> None:
    """Refuse (403) a request that states no identity where ``key`` says ``anonymous: refuse``."""
    if key.anonymous == "refuse":
        raise AuthorizationFailed(
            f"API key {key.name!r} refuses requests that state no identity (anonymous: refuse): "
            "bind the user_id condition to {{#sys.user_id#}} (docs/dify.md)",
            reason="no_identity",
        )


def _check_shape(key: ApiKeyConfig, user_id: str, where: str) -> None:
    """Refuse (400) a claimed user id in none of the shapes ``key`` expects."""
    if fits(user_id, key.user_id_shape):
        return
    shown = user_id if len(user_id) <= 64 else user_id[:64] + "…"
    raise InvalidRequest(
        f"{where}: user id {shown!r} is not in a shape API key {key.name!r} expects "
        f"({', '.join(key.user_id_shape)}): bind it to {{{{#sys.user_id#}}}}, which the app's "
        "backend sets as the service API's user, and send ids of that shape (docs/dify.md)",
        path=where,
        reason="id_shape",
    )


def _check_user_id(user_id: str | None) -> str | None:
    if user_id is None:
        return None
    user_id = user_id.strip()
    if not user_id:
        return None
    if len(user_id) > MAX_USER_ID_LENGTH:
        raise AuthorizationFailed(
            f"user id longer than {MAX_USER_ID_LENGTH} characters", reason="invalid_request"
        )
    return user_id


def _refuse(key: ApiKeyConfig, what: str, instead: str) -> AuthorizationFailed:
    return AuthorizationFailed(
        f"API key {key.name!r} ({key.mode.value} mode) may not send {what}; {instead}"
    )


async def principal_for(
    key: ApiKeyConfig, claims: Claims, acl: AccessControl, oidc: OidcVerifier | None
) -> Principal:
    """``resolve_principal``, after verifying an ``oidc`` key's token with the provider."""
    verified = None
    if key.mode is IdentityMode.OIDC and claims.token is not None and _only_token(claims):
        if oidc is None:  # Settings refuse an oidc key without RSVC_OIDC_ISSUER
            raise AuthorizationFailed(f"API key {key.name!r} needs RSVC_OIDC_ISSUER")
        verified = await oidc.verify(claims.token)
    return resolve_principal(key, claims, acl, oidc_user=verified)


def _only_token(claims: Claims) -> bool:
    return claims.user_id is None and claims.roles is None


def resolve_principal(
    key: ApiKeyConfig,
    claims: Claims,
    acl: AccessControl,
    *,
    oidc_user: VerifiedUser | None = None,
) -> Principal:
    """The principal a request acts for, with effective (hierarchy-expanded) roles.

    For an ``oidc`` key, ``oidc_user`` is what its token said (``principal_for`` verifies it).
    """
    tenant = key.tenant
    if key.mode is IdentityMode.FIXED:
        return Principal(tenant=tenant, roles=acl.expand(key.roles, tenant), key_name=key.name)

    if key.mode in (IdentityMode.SIGNED, IdentityMode.OIDC):
        if not _only_token(claims):
            raise _refuse(key, "plain user_id or role claims", "send a principal_token instead")
        if claims.token is None:
            _may_be_anonymous(key)
            return Principal(tenant=tenant, key_name=key.name)  # anonymous: public only
        if key.mode is IdentityMode.OIDC:
            if oidc_user is None:
                raise InvalidPrincipalToken("the identity token was not verified")
            user_id, asserted = _check_user_id(oidc_user.user_id), oidc_user.roles
        else:
            verified = verify_token(claims.token, key)
            user_id, asserted = _check_user_id(verified.subject), verified.roles
    else:
        if claims.token is not None:
            raise _refuse(key, "a principal_token", "use a signed- or oidc-mode key for tokens")
        if key.mode is IdentityMode.CASBIN and claims.roles is not None:
            raise _refuse(key, "role claims", "roles come from the Casbin policy; send user_id")
        user_id, asserted = _check_user_id(claims.user_id), claims.roles or ()
        if user_id is not None:
            _check_shape(key, user_id, claims.user_id_path)

    for role in asserted:
        if (why := reserved_role(role)) is not None:
            if claims.token is not None:  # a signed or OIDC token: it is not a valid identity
                raise InvalidPrincipalToken(f"the identity token asserts a reserved role: {why}")
            raise AuthorizationFailed(f"a role claim may not name a user or everyone: {why}")
    roles = set(acl.expand(asserted, tenant))
    identity = acl.identify(user_id, tenant)
    if identity.unresolved and key.unknown_user == "refuse":
        shown = user_id if user_id is None or len(user_id) <= 64 else user_id[:64] + "…"
        why = "is an alias two people share" if identity.status == "ambiguous" else "names no one"
        raise UnknownPrincipal(
            f"user id {shown!r} {why} in the directory of tenant {tenant!r}, and API key "
            f"{key.name!r} refuses unknown users (unknown_user: refuse): sync the person, or map "
            "the id (retrieval-svc identity map import)",
            identity,
        )
    if identity.person is not None:
        roles |= acl.person_roles(identity.person, tenant)
    if user_id is None and not roles:
        _may_be_anonymous(key)
    return Principal(
        tenant=tenant,
        user_id=identity.person or user_id,
        roles=frozenset(roles),
        key_name=key.name,
        identity=identity,
    )
