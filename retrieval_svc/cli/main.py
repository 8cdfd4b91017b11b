"""``retrieval-svc``: run the service and manage its keys and index."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key, new_key
from retrieval_svc.cli import directory  # noqa: F401 (registers policy sync-ldap)
from retrieval_svc.cli.audit import audit_app
from retrieval_svc.cli.config import load_settings
from retrieval_svc.cli.identity import identity_app
from retrieval_svc.cli.policy import policy_app
from retrieval_svc.config_words import first_problem
from retrieval_svc.settings import Settings
from retrieval_svc.words import say

app = typer.Typer(
    help="Permission-aware retrieval for Dify.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address [RSVC_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port [RSVC_PORT].")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes, one per core you give the service [RSVC_WORKERS]."),
    ] = None,
) -> None:
    """Run the HTTP service.

    With several workers, each is a full service process (its own clients, policy watcher and
    model) behind one socket; metrics are added up across them (prometheus-client's
    multiprocess mode, in a fresh folder unless PROMETHEUS_MULTIPROC_DIR names one).
    """
    import uvicorn

    from retrieval_svc.app import create_app
    from retrieval_svc.observability import configure_logging

    configure_logging()
    if host:  # the bind address decides the defaults of RSVC_API_DOCS and RSVC_METRICS
        os.environ["RSVC_HOST"] = host
    settings = load_settings()
    count = workers or settings.workers
    options: dict[str, Any] = {
        "host": host or settings.host,
        "port": port or settings.port,
        "log_config": None,  # keep the JSON logging configured above
        "access_log": False,
        "server_header": False,  # no "server: uvicorn" banner
        "timeout_keep_alive": settings.keep_alive_s,
    }
    if count <= 1:
        uvicorn.run(create_app(settings), **options)
        return
    with _multiprocess_metrics(settings) as stop_metrics:
        try:
            uvicorn.run(
                "retrieval_svc.app:app_from_environment", factory=True, workers=count, **options
            )
        finally:
            stop_metrics()


@contextlib.contextmanager
def _multiprocess_metrics(settings: Settings) -> Iterator[Callable[[], None]]:
    """Metrics shared by worker processes: a folder for their values (emptied first), and,
    with RSVC_METRICS=port, the one metrics server, here in the parent."""
    from retrieval_svc.metrics import MULTIPROCESS_ENV

    given = os.environ.get(MULTIPROCESS_ENV)
    folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="rsvc-metrics-"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.db"):  # values of a previous run must not add up with ours
        old.unlink()
    os.environ[MULTIPROCESS_ENV] = str(folder)  # before any worker imports prometheus_client
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if settings.metrics == "port":
        from prometheus_client import CollectorRegistry

        from retrieval_svc.app import serve_metrics

        stop = serve_metrics(CollectorRegistry(), settings.host, settings.metrics_port)
    try:
        yield stop
    finally:
        if not given:
            shutil.rmtree(folder, ignore_errors=True)


class Caller(StrEnum):
    """Who calls with a key, for ``new-key --for``: the defaults that suit it."""

    DIFY = "dify"


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
    scim: Annotated[
        bool,
        typer.Option(
            "--scim", help="A SCIM client's key (/scim/v2 only: provisions users and groups)."
        ),
    ] = False,
    caller: Annotated[
        Caller | None,
        typer.Option(
            "--for",
            help="Who calls with it. dify: refuse unknown users and requests without identity, "
            "so a wrong or missing binding fails on its first request.",
        ),
    ] = None,
    user_id_shape: Annotated[
        str,
        typer.Option(
            help="Comma list of the shapes callers' user ids take: email, uuid, "
            "directory_uid, regex:<pattern>. Others are refused.",
        ),
    ] = "",
) -> None:
    """Generate an API key: print the secret once, and the entry to configure (hash only).

    With --mode signed a strong token secret is generated too; it is part of the entry
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
    if scim:
        entry["scim"] = True
    if mode is IdentityMode.SIGNED:
        entry["token_secret"] = secrets.token_urlsafe(48)
    if caller is Caller.DIFY:
        entry["unknown_user"] = entry["anonymous"] = "refuse"
    if user_id_shape:  # (a regex may hold commas: a lone regex: is taken whole)
        shapes = (
            [user_id_shape] if user_id_shape.startswith("regex:") else _comma_list(user_id_shape)
        )
        entry["user_id_shape"] = shapes
    try:
        ApiKeyConfig.model_validate(entry)
    except ValidationError as exc:
        typer.echo(say("error", what=first_problem(exc)), err=True)
        raise typer.Exit(2) from None
    typer.echo(say("new_key", secret=key), err=True)
    if mode is IdentityMode.SIGNED:
        typer.echo(say("new_key_secret"), err=True)
    if mode is IdentityMode.OIDC:
        typer.echo(say("new_key_oidc"), err=True)
    if caller is Caller.DIFY:
        typer.echo(say("for_dify"), err=True)
        if not user_id_shape:
            typer.echo(say("for_dify_shape"), err=True)
    typer.echo(json.dumps(entry, ensure_ascii=False))


app.add_typer(policy_app, name="policy")
app.add_typer(audit_app, name="audit")
app.add_typer(identity_app, name="identity")
