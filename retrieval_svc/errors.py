"""Every error the service answers with, in one place.

Each error carries the HTTP status and the Dify External Knowledge API error code, and is
rendered as ``{"error_code": int, "error_msg": str}`` (plus ``path`` where a request field is
to blame) by the app's exception handler, or by ``DirectRoutes`` on the retrieval routes.

    ServiceError
    ├── AuthError                  403
    │   ├── MalformedAuthorization 403 / 1001  header missing or not "Bearer <key>"
    │   ├── AuthorizationFailed    403 / 1002  unknown key, or key not allowed this resource
    │   │   └── UnknownPrincipal   403 / 1002  a user id that names no one, refused by its key
    │   └── InvalidPrincipalToken  401 / 1002  principal token (signed or OIDC) invalid or expired
    ├── KnowledgeBaseNotFound      404 / 2001
    ├── InvalidRequest             400 / 3001  body or filter malformed (with ``path``)
    │   ├── UnknownField           400 / 3001  a filter names a field no chunk has
    │   └── QueryRefused           400 / 3001  Elasticsearch refused a value of the request
    ├── SearchUnavailable          503 / 5001  Elasticsearch unreachable, failing or shedding
    │                                          load (``Retry-After`` when it is overloaded)
    ├── IdentityProviderUnavailable 503 / 5003 no keys from the OIDC provider (never fetched)
    └── DeadlineExceeded           504 / 5002  the request deadline ran out

Other HTTP errors raised by the framework (unknown route, wrong method, oversized body) use
the same shape with their HTTP status as ``error_code``; an unexpected exception (a bug) is
500 / 5000 "internal error", logged with the request id.

Each error also has a ``reason``: a short word from ``REFUSAL_REASONS`` naming why a request
was refused (``wrong_key``, ``unknown_user``, ``template_identity``…), for the refusal metric
and the console's list. A class gives its default; a raise site that knows better says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_svc.validation_words import english

# The body of an unexpected exception's answer (500): a bug, logged, never described.
INTERNAL_ERROR_BODY = b'{"error_code": 5000, "error_msg": "internal error"}'


# Why a request was refused: the label values of ``rsvc_refusals_total`` and the console's
# words (bounded: a reason not listed here is counted as ``other``).
REFUSAL_REASONS = (
    "malformed_authorization",  # no "Authorization: Bearer <key>"
    "wrong_key",  # a key no entry has
    "key_kind",  # a SCIM client's key on a retrieval route
    "key_scope",  # the key may not read this knowledge base
    "no_policy",  # the policy lets this principal read no such knowledge base
    "unknown_user",  # a user id that names no one (or two people), refused by its key
    "no_identity",  # no identity at all, refused by its key (anonymous: refuse; MCP: no header)
    "identity_mode",  # a claim the key's mode does not accept (a role claim to a casbin key…)
    "invalid_token",  # a principal or OIDC token invalid or expired
    "template_identity",  # an identity value that is a variable Dify left unresolved
    "id_shape",  # a user id not in the shape the key expects (user_id_shape)
    "identity_condition",  # an identity condition with a negative operator, or stated twice
    "bad_condition",  # a metadata condition or filter that is malformed
    "unknown_knowledge_base",
    "probe",  # Dify's registration probe (no body, or an empty knowledge_id): expected
    "invalid_request",  # any other malformed request
    "other",
)


class ServiceError(Exception):
    """Base of every error that becomes an HTTP answer."""

    status_code: int = 500
    error_code: int = 5000
    reason: str = "other"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        retry_after_s: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.retry_after_s = retry_after_s
        if reason is not None:
            self.reason = reason

    @property
    def headers(self) -> dict[str, str] | None:
        """Response headers this error needs (``Retry-After``), if any."""
        return None if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}

    def body(self) -> dict[str, object]:
        """The JSON body of this error."""
        out: dict[str, object] = {"error_code": self.error_code, "error_msg": self.message}
        if self.path is not None:
            out["path"] = self.path
        return out


class AuthError(ServiceError):
    status_code = 403
    error_code = 1002


class MalformedAuthorization(AuthError):
    error_code = 1001
    reason = "malformed_authorization"


class AuthorizationFailed(AuthError):
    error_code = 1002
    reason = "identity_mode"


class UnknownPrincipal(AuthorizationFailed):
    """A user id that resolves to no one (or to several people), refused because the key
    says ``unknown_user: refuse``; ``identity`` says which and how."""

    def __init__(self, message: str, identity: Any) -> None:
        super().__init__(message, reason="unknown_user")
        self.identity = identity


class InvalidPrincipalToken(AuthError):
    status_code = 401
    error_code = 1002
    reason = "invalid_token"


class KnowledgeBaseNotFound(ServiceError):
    status_code = 404
    error_code = 2001
    reason = "unknown_knowledge_base"


class InvalidRequest(ServiceError):
    status_code = 400
    error_code = 3001
    reason = "invalid_request"


class UnknownField(InvalidRequest):
    """A filter names a field no chunk has; ``field`` is the name, ``known`` the names that
    may be listed back to this caller."""

    def __init__(self, field: str, known: list[str], *, path: str) -> None:
        super().__init__(
            f"{path}: unknown field {field!r}; known fields: {', '.join(known)}",
            path=path,
            reason="bad_condition",
        )
        self.field = field


class QueryRefused(InvalidRequest):
    """Elasticsearch refused a query the service built from the request: a value it cannot
    take (out of a field's range, a date it cannot read). The part is named in ``path``."""


class SearchUnavailable(ServiceError):
    status_code = 503
    error_code = 5001


class IdentityProviderUnavailable(ServiceError):
    """No signing keys from the OpenID Connect provider: its tokens cannot be checked now."""

    status_code = 503
    error_code = 5003


class DeadlineExceeded(ServiceError):
    status_code = 504
    error_code = 5002


class ConfigurationError(Exception):
    """The service cannot start with this configuration."""


def invalid_body(errors: Sequence[Mapping[str, Any]]) -> InvalidRequest:
    """The 400 for a body that failed validation: its first error (pydantic's ``errors()``),
    at the path of the field to blame (``a.b[1].c``, no leading ``body``)."""
    first: Mapping[str, Any] = errors[0] if errors else {"loc": ("body",), "msg": "invalid body"}
    if first.get("type") == "json_invalid":  # FastAPI's and pydantic's: the position is in ctx
        detail = (first.get("ctx") or {}).get("error", "")
        at = [p for p in first.get("loc", ()) if isinstance(p, int)]  # FastAPI's: ("body", pos)
        detail += f" at character {at[0]}" if at else ""
        return InvalidRequest(f"body: not valid JSON ({detail})", path="body")
    loc = tuple(first.get("loc", ()))
    path = join_path("", loc[1:] if loc and loc[0] == "body" else loc) or "body"
    message = english(first)
    if first.get("type") == "missing" and path == "body":
        message = "request body is required"
    return InvalidRequest(f"{path}: {message}", path=path)


def join_path(root: str, loc: tuple[int | str, ...]) -> str:
    """``root`` plus a pydantic location, as ``filter.or[1].and[0].op``."""
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith("~"):
            out += f".{part}" if out else part
    return out
