"""FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, bearer_token
from retrieval_svc.errors import AuthError, AuthorizationFailed
from retrieval_svc.observability import log_fields
from retrieval_svc.settings import Settings
from retrieval_svc.state import AppState

# The key requests act under when auth is disabled for local development.
DEV_KEY = ApiKeyConfig(
    name="auth-disabled", sha256="0" * 64, tenant="default", mode=IdentityMode.TRUSTED
)


# Dependencies are ``async def`` even when they do not await: FastAPI runs a plain ``def``
# dependency in its thread pool, a thread hop per dependency per request (the profile of
# issue #17 found two on every request).


async def get_state(request: Request) -> AppState:
    """The app's long-lived state."""
    state: AppState = request.app.state.rsvc
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_settings(state: StateDep) -> Settings:
    """The app's settings."""
    return state.settings


async def authenticate(
    state: StateDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> ApiKeyConfig:
    """The API key presented in ``Authorization: Bearer``."""
    if state.settings.auth_disabled:
        return DEV_KEY
    try:
        key = state.keys.lookup(bearer_token(authorization))
    except AuthError as exc:
        state.metrics.auth_failures.labels(reason=type(exc).__name__).inc()
        log_fields(auth_error=type(exc).__name__)
        raise
    log_fields(key=key.name, tenant=key.tenant)
    if key.scim:  # a SCIM client provisions people; it never searches as them
        state.metrics.auth_failures.labels(reason="ScimKey").inc()
        raise AuthorizationFailed(
            f"API key {key.name!r} is a SCIM client's: it serves /scim/v2 only", reason="key_kind"
        )
    return key


SettingsDep = Annotated[Settings, Depends(get_settings)]
ApiKeyDep = Annotated[ApiKeyConfig, Depends(authenticate)]
