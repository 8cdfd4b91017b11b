"""MCP's streamable HTTP transport at ``/mcp`` on the service's own app and port.

``build_mcp`` makes the SDK's server (stateless, JSON answers: every POST stands alone, so
any worker of ``serve --workers N`` can answer it and no session can be taken over) and
``McpRoutes`` routes ``/mcp`` (and, in OIDC mode, the protected-resource metadata of RFC 9728)
to it from inside the service's middleware stack: body limit, request id, metrics and the
access log apply as on every route.

Identity, as everywhere (design.md §13):

* ``RSVC_MCP_AUTH=key``: an API key in ``Authorization: Bearer``, with its mode; what the mode
  needs beyond the key (a user id, roles, a principal token) comes from the headers the
  application sets when it connects (``mcp.identity``), never from tool arguments. A request
  without a valid key, or without the header its key's mode needs, is refused before the MCP
  layer sees it (the service's error body).
* ``RSVC_MCP_AUTH=oidc``: the end user's access token from ``RSVC_OIDC_ISSUER``, verified by
  the service's OIDC verifier; the SDK answers a missing or invalid token with 401 and the
  ``WWW-Authenticate: Bearer resource_metadata=…`` challenge the MCP authorization spec
  prescribes, and serves ``/.well-known/oauth-protected-resource/mcp``. The caller acts in
  ``RSVC_MCP_TENANT`` as an ``oidc`` key would: roles from the token's claim, plus Casbin.
"""

from __future__ import annotations

import logging

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval_svc import __version__
from retrieval_svc.auth.identity import Claims, principal_for
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, bearer_token
from retrieval_svc.deps import authenticate
from retrieval_svc.errors import AuthError, ServiceError
from retrieval_svc.mcp.identity import header_claims
from retrieval_svc.mcp.tools import PATH, register
from retrieval_svc.refusals import note_refusal
from retrieval_svc.settings import Settings
from retrieval_svc.state import AppState

METADATA_PREFIX = "/.well-known/oauth-protected-resource"
_ROUTE = Route(PATH, endpoint=lambda _request: None)  # the metrics' and access log's label
_METADATA_ROUTE = Route(METADATA_PREFIX, endpoint=lambda _request: None)

INSTRUCTIONS = (
    "Permission-aware search over the organisation's knowledge bases. Call "
    "list_knowledge_bases to see what this user may read, search to find passages (cite them "
    "as [C:N]), and read_document to read a cited document whole. 企业知识库的权限感知检索。"
)


def oidc_key(settings: Settings) -> ApiKeyConfig:
    """The key an OIDC caller of ``/mcp`` acts with: its tenant, every knowledge base the
    policy grants, roles from the token."""
    return ApiKeyConfig(
        name="mcp-oidc",
        sha256="0" * 63 + "1",
        tenant=settings.mcp_tenant,
        mode=IdentityMode.OIDC,
    )


class OidcTokens:
    """The SDK's token verifier over the service's OIDC verifier (JWKS cache, rotation);
    ``state`` is the app's, set by ``McpRoutes`` when a request arrives."""

    def __init__(self) -> None:
        self.state: AppState | None = None

    async def verify_token(self, token: str) -> AccessToken | None:
        state = self.state
        if state is None or state.oidc is None:
            return None
        try:
            user = await state.oidc.verify(token)
        except ServiceError as exc:
            state.metrics.auth_failures.labels(reason="InvalidPrincipalToken").inc()
            note_refusal(state.metrics, state.refusals, PATH, oidc_key(state.settings), exc)
            return None
        return AccessToken(token=token, client_id=user.user_id or "-", scopes=[])


def build_mcp(settings: Settings, tokens: OidcTokens) -> tuple[MCPServer, ASGIApp]:
    """The MCP server with its tools, and the ASGI app of its transport (its session manager
    runs for the app's lifetime: ``mcp.session_manager.run()``)."""
    oidc = settings.mcp_auth == "oidc"
    resource = f"{settings.public_url.rstrip('/')}{PATH}"
    # The SDK configures logging when a server is made (basicConfig with a rich handler, where
    # none is set yet): the service's own logging (JSON lines) stays exactly as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mcp = MCPServer(
        "retrieval-svc",
        version=__version__,
        instructions=INSTRUCTIONS,
        token_verifier=tokens if oidc else None,
        auth=AuthSettings(
            issuer_url=settings.oidc_issuer,
            resource_server_url=resource,
            required_scopes=[],
            # The audience is checked by the service's verifier against RSVC_OIDC_AUDIENCE.
            validate_token_resource=False,
        )
        if oidc
        else None,
        log_level="WARNING",
    )
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # (a line per stateless request at INFO)
    register(mcp)
    loopback = settings.loopback
    transport = mcp.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
        if not loopback
        else None,
        host=settings.host,
    )
    return mcp, transport


class McpRoutes:
    """ASGI middleware: ``/mcp`` (and the metadata document) to the MCP transport, after the
    caller is known; everything else on to the app."""

    def __init__(
        self, app: ASGIApp, settings: Settings, transport: ASGIApp, tokens: OidcTokens
    ) -> None:
        self.app = app
        self.settings = settings
        self.transport = transport
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PATH and not path.startswith(METADATA_PREFIX):
            await self.app(scope, receive, send)
            return
        scope["route"] = _ROUTE if path == PATH else _METADATA_ROUTE
        if path == PATH and scope.get("method") == "GET":
            # Stateless JSON answers: there is no server-to-client stream to open, and the
            # SDK's would stay open forever (a ping every 15 s; 500 of them held 500 sockets).
            body = {"error_code": 405, "error_msg": "GET /mcp: this server answers POST only"}
            await JSONResponse(body, status_code=405, headers={"Allow": "POST"})(
                scope, receive, send
            )
            return
        state: AppState = scope["app"].state.rsvc
        self.tokens.state = state
        claims = Claims()
        if path == PATH and self.settings.mcp_auth == "oidc":
            key = oidc_key(self.settings)
            authorization = _header(scope, b"authorization")
            try:
                claims = Claims(token=bearer_token(authorization))
            except AuthError as exc:  # the SDK answers with its challenge
                note_refusal(state.metrics, state.refusals, PATH, key, exc)
        elif path == PATH:
            try:
                key = await authenticate(state, _header(scope, b"authorization"))
            except AuthError as exc:
                note_refusal(state.metrics, state.refusals, PATH, None, exc)
                await _refuse(scope, receive, send, exc)
                return
            try:
                claims = header_claims(
                    key, scope.get("headers", []), anonymous_ok=self.settings.auth_disabled
                )
                await principal_for(key, claims, state.acl, state.oidc)  # refused here, once
            except ServiceError as exc:
                if isinstance(exc, AuthError):
                    state.metrics.auth_failures.labels(reason=type(exc).__name__).inc()
                note_refusal(state.metrics, state.refusals, PATH, key, exc)
                await JSONResponse(rpc_error(exc), status_code=exc.status_code)(
                    scope, receive, send
                )
                return
        else:
            key = oidc_key(self.settings)
        scope["rsvc.mcp"] = (state, key, claims)
        await self.transport(scope, receive, send)


REFUSED = -32001  # JSON-RPC's implementation-defined server errors: -32000 … -32099


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def rpc_error(exc: ServiceError) -> dict[str, object]:
    """A refusal as a JSON-RPC error (its id null: the request was not read), the service's
    ``error_code`` and ``error_msg`` in its ``data``. The MCP SDK's client surfaces a JSON-RPC
    error at any HTTP status, so the user reads why ("set X-Rsvc-User…") rather than
    "Server returned an error response"."""
    body = exc.body()
    message = str(body.get("error_msg", "refused"))
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": REFUSED, "message": message, "data": body},
    }


async def _refuse(scope: Scope, receive: Receive, send: Send, exc: AuthError) -> None:
    """401 with a JSON-RPC error (``rpc_error``): the MCP transport never sees the request."""
    challenge = {"WWW-Authenticate": 'Bearer realm="retrieval-svc"'}
    await JSONResponse(rpc_error(exc), status_code=401, headers=challenge)(scope, receive, send)
