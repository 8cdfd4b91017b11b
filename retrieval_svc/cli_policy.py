"""``retrieval-svc policy``: administer a Casbin policy kept in a database — grants, the
lines the service skips, CSV export and import, and the LDAP / Active Directory sync."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError, csv_line
from retrieval_svc.acl.rule import DEFAULT_TENANT
from retrieval_svc.config_checks import database_url

if TYPE_CHECKING:
    from retrieval_svc.directory.metrics import SyncOutcome

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
    """The rules in force, as Casbin CSV lines (values quoted where they need it)."""
    admin = _admin(ctx)
    rows = _read(lambda: admin.rules(tenant))
    for row in rows:
        typer.echo(csv_line(row[0], row[1:]))
    if not rows:
        typer.echo(f"no rules{f' in tenant {tenant}' if tenant else ''}", err=True)


T = TypeVar("T")


def _read(read: Callable[[], T]) -> T:
    try:
        return read()
    except PolicyError as exc:
        typer.echo(f"error: {exc}", err=True)
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
        typer.echo(
            f"{len(skipped)} stored lines skipped; remove one with "
            "`retrieval-svc policy delete ROW`, or fix it at its source",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo("every stored line is in force")


@policy_app.command("delete")
def delete_row(
    ctx: typer.Context,
    row: Annotated[int, typer.Argument(help="The row id `policy check` names.", min=1)],
) -> None:
    """Delete one stored line by its row id, whatever it holds (recorded in the history)."""
    admin = _admin(ctx)
    found = _read(lambda: admin.delete_row(row))
    if found is None:
        typer.echo(f"error: there is no row {row}", err=True)
        raise typer.Exit(2)
    typer.echo(f"deleted row {row}: {found[0]}, {', '.join(repr(v) for v in found[1])}")


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
        typer.echo(f"error: {exc}; the database is unchanged", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"imported {count} rules from {file}")


_EVERY = re.compile(r"^(\d+)([smh])$")


def _interval(value: str | None) -> float | None:
    if value is None:
        return None
    match = _EVERY.match(value.strip())
    if not match or int(match[1]) == 0:
        raise typer.BadParameter(f"{value!r} is not an interval such as 15m, 1h or 90s")
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


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
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="An intended reorganisation: apply whatever the directory says, past the "
            "removal limits (recorded as forced).",
        ),
    ] = False,
    every: Annotated[
        str | None,
        typer.Option(
            help="Sync again at this interval (15m, 1h, 90s) until stopped: a schedule "
            "without Kubernetes. A failed sync is reported and the next one tried.",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int, typer.Option(min=0, help="With --every: stop after this many syncs (0: never).")
    ] = 0,
    metrics_textfile: Annotated[
        Path | None,
        typer.Option(help="Write the sync's metrics here after each sync (node-exporter)."),
    ] = None,
    pushgateway: Annotated[
        str | None,
        typer.Option(
            help="Push the sync's metrics to this Pushgateway after each sync.",
            envvar="RSVC_PUSHGATEWAY_URL",
        ),
    ] = None,
) -> None:
    """Make the tenant's grants of the directory's roles what LDAP / Active Directory says:
    users and groups read whole (paged, nested groups expanded), the difference applied in one
    transaction and recorded (actor sync-ldap), with the roles the sync now owns. A deleted or
    renamed group's grants go. Exit 2: the file or what was read cannot be applied; 3: the
    directory failed or answered partially; 4: past the removal limits. Each changes nothing."""
    from retrieval_svc.directory import DirectoryError, load_sync
    from retrieval_svc.directory.metrics import SyncOutcome, export

    interval = _interval(every)
    try:
        first = load_sync(config)
    except DirectoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    admin = _admin(ctx)
    outcome = SyncOutcome(first.tenant, first.name)
    done = 0
    while True:
        code, outcome = _sync_once(admin, config, outcome, dry_run, max_removed_share, force)
        done += 1
        if (metrics_textfile or pushgateway) and not dry_run:
            try:
                export(outcome, textfile=metrics_textfile, pushgateway=pushgateway)
            except OSError as exc:
                typer.echo(f"warning: could not export metrics: {exc}", err=True)
        if interval is None:
            raise typer.Exit(code)
        if count and done >= count:
            raise typer.Exit(0)
        time.sleep(interval)


def _sync_once(
    admin: PolicyAdmin,
    config: Path,
    last: SyncOutcome,
    dry_run: bool,
    max_removed_share: float | None,
    force: bool,
) -> tuple[int, SyncOutcome]:
    """One sync, the file read anew; its exit code and outcome (messages on the way)."""
    from retrieval_svc.acl.history import Actor
    from retrieval_svc.directory import (
        DirectoryError,
        Limits,
        RemovalLimit,
        load_sync,
        plan,
        read_directory,
    )

    try:
        sync = load_sync(config)
        roles = sync.role_mapping()
    except DirectoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2, last.next(ok=False, failure="invalid")
    admin.actor = Actor(sync.name, "ldap")
    try:
        directory = read_directory(sync)
    except DirectoryError as exc:  # unreachable, cut off, refused: exit 3, as for a cluster
        typer.echo(f"error: {exc}; nothing changed", err=True)
        return 3, last.next(ok=False, failure="unreachable")
    share = sync.max_removed_share if max_removed_share is None else max_removed_share
    limits = Limits(share, sync.removal_floor, force)
    read = f"{len(directory.users)} users, {len(directory.groups)} groups from {sync.url}"
    try:
        grouping = admin.store.rules().grouping
        before = admin.owned_roles(sync.tenant, sync.name)
        changes = plan(directory, roles, sync.tenant, grouping, owned_before=before, limits=limits)
    except RemovalLimit as exc:  # the directory looks broken: say so, and in the history
        typer.echo(f"error: {exc}", err=True)
        if not dry_run:
            admin.record_refusal(
                sync.tenant, "sync-ldap-refused", f"limit {exc.limit}: {exc} ({read})"
            )
        return 4, last.next(ok=False, failure="limit")
    except (DirectoryError, PolicyError) as exc:  # what it read cannot be applied
        typer.echo(f"error: {exc}; nothing changed", err=True)
        return 2, last.next(ok=False, failure="invalid")
    for problem in changes.skipped:
        typer.echo(f"skipped: {problem}", err=True)
    for change in changes.changes:
        sign = "+" if change.op == "add" else "-"
        typer.echo(f"{sign} {csv_line('g', change.values)}")
    if dry_run:
        typer.echo(f"dry run: would add {changes.added}, remove {changes.removed} ({read})")
        return 0, last
    detail = read + (" (forced past the removal limits)" if force else "")
    if changes.skipped:
        detail += f"; {len(changes.skipped)} entries skipped"
    try:
        added, removed = admin.sync(
            "sync-ldap",
            sync.tenant,
            sync.name,
            changes.changes,
            changes.owned,
            detail=detail,
            people=changes.identities,
        )
    except PolicyError as exc:
        typer.echo(f"error: {exc}; nothing changed", err=True)
        return 2, last.next(ok=False, failure="invalid")
    gone = sorted(set(before) - changes.owned)
    typer.echo(
        f"synced: added {changes.added}, removed {changes.removed}; "
        f"{changes.grants} grants from {read}"
        + (f"; no longer given by the directory: {', '.join(gone)}" if gone else "")
        + (f"; {len(changes.skipped)} entries skipped" if changes.skipped else "")
        + (f"; ids people are known by: +{added} -{removed}" if added or removed else "")
    )
    outcome = last.next(ok=True)
    outcome.added, outcome.removed, outcome.skipped = (
        changes.added,
        changes.removed,
        len(changes.skipped),
    )
    return 0, outcome
