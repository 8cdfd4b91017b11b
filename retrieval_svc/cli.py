"""``retrieval-svc``: run the service and manage its keys and index."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.acl.rule import DEFAULT_TENANT
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key, new_key
from retrieval_svc.cli_audit import audit_app
from retrieval_svc.cli_config import load_settings
from retrieval_svc.config_checks import database_url
from retrieval_svc.settings import Settings

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


policy_app = typer.Typer(
    help="Administer a Casbin policy kept in a database (RSVC_CASBIN_DB_URL). Every command "
    "validates its input and is idempotent; a running service picks changes up within "
    "RSVC_POLICY_CHECK_INTERVAL_S.",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")
app.add_typer(audit_app, name="audit")

TenantOption = Annotated[str, typer.Option("--tenant", help="Tenant the rule applies in.")]


@policy_app.callback()
def policy_database(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="RSVC_CASBIN_DB_URL",
            help="SQLAlchemy URL of the policy database (sqlite:///policy.db, "
            "postgresql+psycopg://user:pass@host/db).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        Path, typer.Option("--model", envvar="RSVC_CASBIN_MODEL", help="Casbin model file.")
    ] = DEFAULT_MODEL,
) -> None:
    """Where the policy lives, for the command that follows (opened when it runs)."""
    if db:
        try:
            database_url(db)
        except ValueError as exc:
            typer.secho(f"configuration error: RSVC_CASBIN_DB_URL: {exc}", err=True, fg="red")
            raise typer.Exit(2) from None
    ctx.obj = PolicyDatabase(model, db) if db else None


def _admin(ctx: typer.Context) -> PolicyAdmin:
    if ctx.obj is None:
        typer.echo(
            "error: which policy database? Set RSVC_CASBIN_DB_URL or pass --db "
            "(e.g. sqlite:///policy.db) before the command",
            err=True,
        )
        raise typer.Exit(2)
    try:
        return PolicyAdmin(ctx.obj)
    except PolicyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _change(what: str, change: Callable[[], bool]) -> None:
    try:
        changed = change()
    except PolicyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{'done' if changed else 'unchanged (already so)'}: {what}")


@policy_app.command("grant-role")
def grant_role(
    ctx: typer.Context, user: str, role: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """USER holds ROLE in the tenant (USER is the user id, without "user:")."""
    admin = _admin(ctx)
    _change(f"{user} holds {role} in {tenant}", lambda: admin.grant_role(user, role, tenant))


@policy_app.command("revoke-role")
def revoke_role(
    ctx: typer.Context, user: str, role: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """USER no longer holds ROLE in the tenant."""
    admin = _admin(ctx)
    _change(
        f"{user} no longer holds {role} in {tenant}", lambda: admin.revoke_role(user, role, tenant)
    )


@policy_app.command()
def inherit(
    ctx: typer.Context, role: str, parent: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Holders of ROLE also hold PARENT in the tenant."""
    admin = _admin(ctx)
    _change(f"{role} inherits {parent} in {tenant}", lambda: admin.inherit(role, parent, tenant))


@policy_app.command()
def disinherit(
    ctx: typer.Context, role: str, parent: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Undo `inherit`."""
    admin = _admin(ctx)
    _change(
        f"{role} no longer inherits {parent} in {tenant}",
        lambda: admin.disinherit(role, parent, tenant),
    )


@policy_app.command()
def allow(
    ctx: typer.Context, subject: str, knowledge_ids: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """SUBJECT (a role, user:ID or anyone) may read knowledge bases matching KNOWLEDGE_IDS
    (a keyMatch pattern: building-*, *) in the tenant."""
    admin = _admin(ctx)
    _change(
        f"{subject} may read {knowledge_ids} in {tenant}",
        lambda: admin.allow(subject, knowledge_ids, tenant),
    )


@policy_app.command()
def disallow(
    ctx: typer.Context, subject: str, knowledge_ids: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Undo `allow`."""
    admin = _admin(ctx)
    _change(
        f"{subject} may no longer read {knowledge_ids} in {tenant}",
        lambda: admin.disallow(subject, knowledge_ids, tenant),
    )


@policy_app.command("list")
def list_rules(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's rules.")] = None,
) -> None:
    """The rules, as Casbin CSV lines."""
    rows = _admin(ctx).rules(tenant)
    for row in rows:
        typer.echo(", ".join(row))
    if not rows:
        typer.echo(f"no rules{f' in tenant {tenant}' if tenant else ''}", err=True)


@policy_app.command("export")
def export_policy(ctx: typer.Context) -> None:
    """The whole policy as a Casbin CSV file on standard output (`import` reads it back)."""
    typer.echo(_admin(ctx).export_csv(), nl=False)


@policy_app.command("import")
def import_policy(
    ctx: typer.Context, file: Annotated[Path, typer.Argument(help="A Casbin CSV policy file.")]
) -> None:
    """Replace the whole policy in the database by FILE (validated first; one transaction)."""
    try:
        count = _admin(ctx).import_csv(file)
    except PolicyError as exc:
        typer.echo(f"error: {exc}; the database is unchanged", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"imported {count} rules from {file}")


@policy_app.command("sync-ldap")
def sync_ldap(
    ctx: typer.Context,
    config: Annotated[
        Path, typer.Argument(help="The sync file (YAML): server, bases, group → role mapping.")
    ],
    dry_run: Annotated[
        bool, typer.Option(help="Print the changes the sync would make; change nothing.")
    ] = False,
    max_removed_share: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            help="Refuse to remove more than this share of the directory's grants at once "
            "[the file's, 0.5].",
        ),
    ] = None,
) -> None:
    """Make the tenant's grants of the mapped roles what LDAP / Active Directory says: users
    and groups read whole (paged, nested groups expanded), the difference applied in one
    transaction and recorded (actor sync-ldap). A directory that fails or answers partially
    changes nothing."""
    from retrieval_svc.acl.history import Actor
    from retrieval_svc.directory import DirectoryError, load_sync, plan, read_directory

    try:
        sync = load_sync(config)
        roles = sync.role_mapping()
    except DirectoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    admin = _admin(ctx)
    admin.actor = Actor("sync-ldap", "ldap")
    try:
        directory = read_directory(sync)
    except DirectoryError as exc:  # unreachable, cut off, refused: exit 3, as for a cluster
        typer.echo(f"error: {exc}; nothing changed", err=True)
        raise typer.Exit(3) from None
    try:
        share = sync.max_removed_share if max_removed_share is None else max_removed_share
        _, grouping = admin.store.rules()
        changes = plan(directory, roles, sync.tenant, grouping, max_removed_share=share)
    except (DirectoryError, PolicyError) as exc:  # what it read cannot be applied
        typer.echo(f"error: {exc}; nothing changed", err=True)
        raise typer.Exit(2) from None
    read = f"{changes.users} users, {changes.groups} groups from {sync.url}"
    for change in changes.changes:
        sign = "+" if change.op == "add" else "-"
        typer.echo(f"{sign} g, {', '.join(change.values)}")
    if dry_run:
        typer.echo(f"dry run: would add {changes.added}, remove {changes.removed} ({read})")
        return
    try:
        admin.apply("sync-ldap", changes.changes, detail=read)
    except PolicyError as exc:
        typer.echo(f"error: {exc}; nothing changed", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"synced: added {changes.added}, removed {changes.removed}; "
        f"{changes.grants} grants from {read}"
    )
