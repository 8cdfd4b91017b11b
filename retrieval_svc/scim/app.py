"""``/scim/v2``: the SCIM 2.0 server (RFC 7643/7644) an identity provider pushes people and
groups to (issue #35 §3). scim2-server's ASGI application serves the protocol; this module puts
the service's keys in front of it and gives each tenant its own resources.

A request must carry ``Authorization: Bearer <key>`` of a key with ``"scim": true``; the key's
tenant is the only tenant it sees, and in it only its own resources (another tenant's or another
key's resource ids answer 404, as ids that do not exist): each key is its own source of grants.
A SCIM key is refused on every other route.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Mapping, Sequence

from scim2_server.applications.asgi import ASGIApplication
from scim2_server.utils import load_default_provider
from starlette.types import Message, Receive, Scope, Send

from retrieval_svc.acl.admin import checked_role
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.policy_store import PolicyDatabase
from retrieval_svc.auth.keys import bearer_token
from retrieval_svc.errors import AuthError
from retrieval_svc.languages import language
from retrieval_svc.observability import log_fields
from retrieval_svc.scim.storage import TenantStorage, ThreadedStorage, ensure_tables
from retrieval_svc.words import problem

_actor: contextvars.ContextVar[Actor] = contextvars.ContextVar("rsvc_scim_actor")
_ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"schemas": [_ERROR], "status": str(status), "detail": detail}).encode()
    headers = [(b"content-type", b"application/scim+json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="scim"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ScimGateway:
    """The ASGI application mounted at ``/scim``: authenticate, then the key's tenant's SCIM
    application (made on first use)."""

    def __init__(
        self, store: PolicyDatabase, roles: Mapping[str, Mapping[str, Sequence[str]]] | None = None
    ) -> None:
        self.engine = store.engine()
        # Per tenant, which group names give which roles (RSVC_SCIM_ROLES); a tenant without
        # one: a group gives the role of its own name. Checked as every role is.
        self.roles = {
            tenant: {
                group: tuple(checked_role(f"RSVC_SCIM_ROLES[{tenant}][{group}]", r) for r in rs)
                for group, rs in groups.items()
            }
            for tenant, groups in (roles or {}).items()
        }
        ensure_tables(self.engine)
        self.provider = load_default_provider()
        self.clients: dict[tuple[str, str], ASGIApplication] = {}

    def application(self, tenant: str, key: str) -> ASGIApplication:
        """The SCIM application of one key in its tenant: each key its own resources and
        grants (``TenantStorage``)."""
        if (tenant, key) not in self.clients:
            storage = TenantStorage(
                self.engine, self.provider, tenant, _actor.get, self.roles.get(tenant)
            )
            made = ASGIApplication(ThreadedStorage(storage), self.provider)
            self.clients[(tenant, key)] = made
        return self.clients[(tenant, key)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        state = scope["app"].state.rsvc
        headers = dict(scope.get("headers") or [])
        try:
            token = bearer_token((headers.get(b"authorization") or b"").decode("latin-1"))
            key = state.keys.lookup(token)
        except AuthError as exc:
            state.metrics.auth_failures.labels(reason=type(exc).__name__).inc()
            log_fields(auth_error=type(exc).__name__)
            await _refuse(send, 401, "a SCIM client's API key is required (Authorization: Bearer)")
            return
        log_fields(key=key.name, tenant=key.tenant)
        if not key.scim:
            await _refuse(send, 403, f"API key {key.name!r} is not a SCIM client's key")
            return
        _actor.set(Actor(f"scim:{key.name}", "scim"))
        asked = (headers.get(b"accept-language") or b"").decode("latin-1")
        if language(asked, language(state.settings.default_language)) == "zh":
            send = _invalid_value_in_chinese(send)
        await self.application(key.tenant, key.name)(dict(scope), receive, send)  # type: ignore[arg-type]


def _invalid_value_in_chinese(send: Send) -> Send:
    """``send``, with an ``invalidValue`` refusal's detail (why a userName, displayName or id
    cannot be stored) said in Chinese: what an identity provider's provisioning log shows."""
    held: list[Message] = []

    async def said(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 400:
            held.append(message)
            return
        if not held:
            await send(message)
            return
        body = message.get("body", b"")
        try:
            error = json.loads(body)
            if isinstance(error, dict) and error.get("scimType") == "invalidValue":
                error["detail"] = problem(str(error.get("detail", "")), "zh")
                body = json.dumps(error, ensure_ascii=False).encode()
        except ValueError:
            pass
        start = held.pop()
        names = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        names.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": names})
        await send({**message, "body": body})

    return said
