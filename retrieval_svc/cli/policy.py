"""``retrieval-svc policy``: administer a Casbin policy kept in a database — grants, the
lines the service skips, CSV export and import, and the LDAP / Active Directory sync."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError, csv_line
from retrieval_svc.acl.rule import DEFAULT_TENANT
from retrieval_svc.config_checks import database_url
from retrieval_svc.config_words import named
from retrieval_svc.words import problem, say

if TYPE_CHECKING:
    pass

policy_app = typer.Typer(
    help="Administer a Casbin policy kept in a database (RSVC_CASBIN_DB_URL). Every command "
    "validates its input and is idempotent; a running service picks changes up within "
    "RSVC_POLICY_CHECK_INTERVAL_S.",
    no_args_is_help=True,
)

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
            what = named("RSVC_CASBIN_DB_URL", problem(exc))
            said = say("configuration_error", what=what)
            typer.secho(said, err=True, fg="red")
            raise typer.Exit(2) from None
    ctx.obj = PolicyDatabase(model, db) if db else None


def _admin(ctx: typer.Context) -> PolicyAdmin:
    if ctx.obj is None:
        typer.echo(say("policy_no_db"), err=True)
        raise typer.Exit(2)
    try:
        return PolicyAdmin(ctx.obj)
    except PolicyError as exc:
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None


def _change(what: str, change: Callable[[], bool]) -> None:
    try:
        changed = change()
    except PolicyError as exc:
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    typer.echo(say("policy_done" if changed else "policy_unchanged", what=what))


@policy_app.command("grant-role")
def grant_role(
    ctx: typer.Context, user: str, role: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """USER holds ROLE in the tenant (USER is the user id, without "user:")."""
    admin = _admin(ctx)
    _change(
        say("change_holds", user=user, role=role, tenant=tenant),
        lambda: admin.grant_role(user, role, tenant),
    )


@policy_app.command("revoke-role")
def revoke_role(
    ctx: typer.Context, user: str, role: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """USER no longer holds ROLE in the tenant."""
    admin = _admin(ctx)
    _change(
        say("change_no_longer_holds", user=user, role=role, tenant=tenant),
        lambda: admin.revoke_role(user, role, tenant),
    )


@policy_app.command()
def inherit(
    ctx: typer.Context, role: str, parent: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Holders of ROLE also hold PARENT in the tenant."""
    admin = _admin(ctx)
    _change(
        say("change_inherits", role=role, parent=parent, tenant=tenant),
        lambda: admin.inherit(role, parent, tenant),
    )


@policy_app.command()
def disinherit(
    ctx: typer.Context, role: str, parent: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Undo `inherit`."""
    admin = _admin(ctx)
    _change(
        say("change_no_longer_inherits", role=role, parent=parent, tenant=tenant),
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
        say("change_may_read", subject=subject, knowledge_ids=knowledge_ids, tenant=tenant),
        lambda: admin.allow(subject, knowledge_ids, tenant),
    )


@policy_app.command()
def disallow(
    ctx: typer.Context, subject: str, knowledge_ids: str, tenant: TenantOption = DEFAULT_TENANT
) -> None:
    """Undo `allow`."""
    admin = _admin(ctx)
    _change(
        say(
            "change_may_no_longer_read", subject=subject, knowledge_ids=knowledge_ids, tenant=tenant
        ),
        lambda: admin.disallow(subject, knowledge_ids, tenant),
    )


@policy_app.command("list")
def list_rules(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's rules.")] = None,
) -> None:
    """The rules in force, as Casbin CSV lines (values quoted where they need it)."""
    admin = _admin(ctx)
    rows = _read(lambda: admin.rules(tenant))
    for row in rows:
        typer.echo(csv_line(row[0], row[1:]))
    if not rows:
        typer.echo(say("no_rules_in", tenant=tenant) if tenant else say("no_rules"), err=True)


T = TypeVar("T")


def _read(read: Callable[[], T]) -> T:
    try:
        return read()
    except PolicyError as exc:
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None


@policy_app.command("check")
def check_policy(ctx: typer.Context) -> None:
    """List the stored lines the service skips (each a grant not given, so access is
    narrower than they say): exit 1 when there is one. `policy delete ROW` removes one."""
    admin = _admin(ctx)
    skipped = _read(admin.check)
    for line in skipped:
        typer.echo(line.describe())
    if skipped:
        typer.echo(say("policy_skipped", n=len(skipped)), err=True)
        raise typer.Exit(1)
    typer.echo(say("policy_all_in_force"))


@policy_app.command("delete")
def delete_row(
    ctx: typer.Context,
    row: Annotated[int, typer.Argument(help="The row id `policy check` names.", min=1)],
) -> None:
    """Delete one stored line by its row id, whatever it holds (recorded in the history)."""
    admin = _admin(ctx)
    found = _read(lambda: admin.delete_row(row))
    if found is None:
        typer.echo(say("policy_no_row", row=row), err=True)
        raise typer.Exit(2)
    line = f"{found[0]}, {', '.join(repr(v) for v in found[1])}"
    typer.echo(say("deleted_row", row=row, line=line))


@policy_app.command("export")
def export_policy(ctx: typer.Context) -> None:
    """The whole policy as a Casbin CSV file on standard output (`import` reads it back)."""
    admin = _admin(ctx)
    typer.echo(_read(admin.export_csv), nl=False)


@policy_app.command("import")
def import_policy(
    ctx: typer.Context, file: Annotated[Path, typer.Argument(help="A Casbin CSV policy file.")]
) -> None:
    """Replace the whole policy in the database by FILE (validated first; one transaction)."""
    try:
        count = _admin(ctx).import_csv(file)
    except PolicyError as exc:
        typer.echo(say("error_db_unchanged", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    typer.echo(say("policy_imported", n=count, file=file))
