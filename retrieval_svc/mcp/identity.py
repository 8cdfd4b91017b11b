"""Who an MCP request acts for: what the application set when it connected, never the model.

In an agent the model fills every tool argument, so a prompt injected into a retrieved passage
could ask for any user or role; no tool argument names an identity (design.md §13). What a key
mode needs beyond the key comes from request headers the application sets once per MCP
server (Dify, desktop and IDE clients all take custom headers):

| header                   | carries                                        | for keys of mode    |
|--------------------------|------------------------------------------------|---------------------|
| `X-Rsvc-User`            | the end user's id                              | `casbin`, `trusted` |
| `X-Rsvc-Roles`           | the end user's roles, comma text or JSON array | `trusted`           |
| `X-Rsvc-Principal-Token` | a signed principal token, or the OIDC token    | `signed`, `oidc`    |

Values are UTF-8; percent-encoding (``%E7%89%A9…``) is decoded, for clients that send ASCII
headers only (a literal ``%`` is then ``%25``). A key mode that needs a claim and gets none is
refused at connection (403) with the header to set; a ``fixed`` key needs none and ignores
them, as it ignores every caller claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

from retrieval_svc.auth.identity import Claims, make_claims
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode
from retrieval_svc.errors import AuthorizationFailed, InvalidRequest

USER_HEADER = "x-rsvc-user"
ROLES_HEADER = "x-rsvc-roles"
TOKEN_HEADER = "x-rsvc-principal-token"
MAX_HEADER_CHARS = 16_384  # a principal token or 1,024 roles fit; more is refused unread

_NEEDS: dict[IdentityMode, tuple[str, ...]] = {
    IdentityMode.CASBIN: (USER_HEADER,),
    IdentityMode.TRUSTED: (USER_HEADER, ROLES_HEADER),
    IdentityMode.SIGNED: (TOKEN_HEADER,),
    IdentityMode.OIDC: (TOKEN_HEADER,),
    IdentityMode.FIXED: (),
}
_SPELLED = {
    USER_HEADER: "X-Rsvc-User",
    ROLES_HEADER: "X-Rsvc-Roles",
    TOKEN_HEADER: "X-Rsvc-Principal-Token",
}


def header_claims(
    key: ApiKeyConfig, headers: Iterable[tuple[bytes, bytes]], *, anonymous_ok: bool = False
) -> Claims:
    """The claims of an MCP request with ``key``, from its identity headers; raises
    ``AuthorizationFailed`` (which header to set) when the key's mode needs one that is missing
    (unless ``anonymous_ok``: auth disabled for local development), ``InvalidRequest`` when a
    value is malformed."""
    found: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name not in _SPELLED:
            continue
        if name in found:
            raise InvalidRequest(f"header {_SPELLED[name]}: sent more than once", path=name)
        if len(raw_value) > MAX_HEADER_CHARS:
            raise InvalidRequest(
                f"header {_SPELLED[name]}: longer than {MAX_HEADER_CHARS} bytes", path=name
            )
        try:
            value = unquote(raw_value.decode("utf-8"), errors="strict").strip()
        except UnicodeDecodeError:
            raise InvalidRequest(f"header {_SPELLED[name]}: not UTF-8", path=name) from None
        if value:
            found[name] = value
    if key.mode is IdentityMode.FIXED:
        return Claims()  # the key carries the roles; what a caller says is ignored
    needed = _NEEDS[key.mode]
    if not anonymous_ok and not any(h in found for h in needed):
        raise AuthorizationFailed(
            f"API key {key.name!r} ({key.mode.value} mode) needs the end user's identity over "
            f"MCP: set the header {' or '.join(_SPELLED[h] for h in needed)} when the "
            "application connects (tool arguments never carry identity)",
            reason="no_identity",
        )
    return make_claims(
        found.get(USER_HEADER),
        found.get(ROLES_HEADER),
        found.get(TOKEN_HEADER),
        path="headers",
    )
