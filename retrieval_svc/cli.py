"""``retrieval-svc``: run the service and manage its keys and index."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import ValidationError

from retrieval_svc.auth.keys import IdentityMode, hash_key, new_key
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
        typer.secho(f"configuration error:\n{exc}", err=True, fg="red")
        raise typer.Exit(2) from exc


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
    )


@app.command("new-key")
def new_key_command(
    name: Annotated[str, typer.Option(help="A name for the key, shown in logs.")],
    tenant: Annotated[str, typer.Option(help="Tenant the key acts in.")] = "default",
    mode: Annotated[IdentityMode, typer.Option(help="Identity mode.")] = IdentityMode.CASBIN,
    knowledge_ids: Annotated[str, typer.Option(help="Comma list of allowed KB patterns.")] = "*",
) -> None:
    """Generate an API key: print the secret once, and the entry to configure (hash only)."""
    key = new_key()
    entry = {
        "name": name,
        "sha256": hash_key(key),
        "tenant": tenant,
        "mode": mode.value,
        "knowledge_ids": [k.strip() for k in knowledge_ids.split(",") if k.strip()],
    }
    typer.echo(f"API key (shown once, give it to the caller): {key}", err=True)
    typer.echo(json.dumps(entry, ensure_ascii=False))
