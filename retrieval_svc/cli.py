"""``retrieval-svc``: run the service and manage its keys and index."""

from __future__ import annotations

import json
import secrets
from typing import Annotated

import typer
from pydantic import ValidationError

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key, new_key
from retrieval_svc.settings import Settings

app = typer.Typer(
    help="Permission-aware retrieval for Dify.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def load_settings() -> Settings:
    """Settings from the environment, or a readable exit."""
    try:
        return Settings()
    except ValidationError as exc:
        lines = [
            f"  {'.'.join(str(p) for p in e['loc']) or 'settings'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        ]
        typer.secho("configuration error:\n" + "\n".join(lines), err=True, fg="red")
        raise typer.Exit(2) from None


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address [RSVC_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port [RSVC_PORT].")] = None,
) -> None:
    """Run the HTTP service."""
    import uvicorn

    from retrieval_svc.app import create_app
    from retrieval_svc.observability import configure_logging

    configure_logging()
    settings = load_settings()
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
        log_config=None,  # keep the JSON logging configured above
        access_log=False,
        server_header=False,  # no "server: uvicorn" banner
    )


def _comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.replace("，", ",").split(",") if item.strip()]


@app.command("new-key")
def new_key_command(
    name: Annotated[str, typer.Option(help="A name for the key, shown in logs.")],
    tenant: Annotated[str, typer.Option(help="Tenant the key acts in.")] = "default",
    mode: Annotated[IdentityMode, typer.Option(help="Identity mode.")] = IdentityMode.CASBIN,
    knowledge_ids: Annotated[str, typer.Option(help="Comma list of allowed KB patterns.")] = "*",
    roles: Annotated[
        str, typer.Option(help="Comma list of roles the key carries (needed by --mode fixed).")
    ] = "",
    admin: Annotated[
        bool, typer.Option("--admin", help="May call operator endpoints (explain).")
    ] = False,
) -> None:
    """Generate an API key: print the secret once, and the entry to configure (hash only).

    With ``--mode signed`` a strong token secret is generated too; it is part of the entry
    (the service needs it to verify tokens) and is what your backend signs tokens with.
    """
    key = new_key()
    entry: dict[str, object] = {
        "name": name,
        "sha256": hash_key(key),
        "tenant": tenant,
        "mode": mode.value,
        "knowledge_ids": _comma_list(knowledge_ids),
    }
    if roles:
        entry["roles"] = _comma_list(roles)
    if admin:
        entry["admin"] = True
    if mode is IdentityMode.SIGNED:
        entry["token_secret"] = secrets.token_urlsafe(48)
    try:
        ApiKeyConfig.model_validate(entry)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"API key (shown once, give it to the caller): {key}", err=True)
    if mode is IdentityMode.SIGNED:
        typer.echo(
            "token secret (in the entry below; your backend signs principal tokens with it, "
            "HS256): keep the entry in a Secret",
            err=True,
        )
    if mode is IdentityMode.OIDC:
        typer.echo(
            "oidc mode: the service verifies the end user's token with your identity provider; "
            "set RSVC_OIDC_ISSUER and RSVC_OIDC_AUDIENCE (docs/permissions.md)",
            err=True,
        )
    typer.echo(json.dumps(entry, ensure_ascii=False))
