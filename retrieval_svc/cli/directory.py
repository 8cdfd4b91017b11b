"""``retrieval-svc policy sync-ldap``: a tenant's grants of the directory's roles made what
LDAP / Active Directory says, once or on a schedule (``--every``), with its metrics."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.policy_store import PolicyError, csv_line
from retrieval_svc.cli.policy import _admin, policy_app
from retrieval_svc.key_entry import SID_PREFIX
from retrieval_svc.words import problem as said_again
from retrieval_svc.words import say

if TYPE_CHECKING:
    from retrieval_svc.directory import DirectoryReplica
    from retrieval_svc.directory.metrics import SyncOutcome

_EVERY = re.compile(r"^(\d+)([smh])$")


FULL_READ_EVERY = 60  # syncs that may skip reading an unchanged directory in a row
CHECK_EVERY_S = 5.0  # with --every: how often the directory's change stamp is asked between syncs


def _stamp(config: Path) -> str | None:
    """The directory's change stamp (``directory_stamp``), or None."""
    from retrieval_svc.directory import DirectoryError, directory_stamp, load_sync

    try:
        return directory_stamp(load_sync(config))
    except DirectoryError:
        return None


def _interval(value: str | None) -> float | None:
    if value is None:
        return None
    if value.strip().isdigit():  # (a bare number: seconds)
        value = value.strip() + "s"
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
            help="Sync again at this interval (15m, 1h, 90s, or seconds: 10) until stopped: a "
            "schedule without Kubernetes. A directory whose contextCSN (OpenLDAP with "
            "syncprov) or highestCommittedUSN (Active Directory) has not changed is not read "
            "again; a changed OpenLDAP directory is read only where it changed (a syncrepl "
            "refresh). A failed sync is reported and the next one tried.",
            show_default=False,
        ),
    ] = None,
    check_every: Annotated[
        float,
        typer.Option(
            min=0,
            help="With --every: between syncs, ask the directory's change stamp this often "
            "(seconds) and sync at once when it changed, so a change is in force in seconds "
            "whatever the interval; one small search of the root or context entry. 0: only "
            "at the interval. Directories without a stamp sync at the interval.",
        ),
    ] = CHECK_EVERY_S,
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
    from retrieval_svc.directory import DirectoryError, DirectoryReplica, load_sync
    from retrieval_svc.directory.metrics import SyncOutcome, export

    interval = _interval(every)
    try:
        first = load_sync(config)
    except DirectoryError as exc:
        typer.echo(say("error", what=said_again(exc)), err=True)
        raise typer.Exit(2) from None
    admin = _admin(ctx)
    outcome = SyncOutcome(first.tenant, first.name)
    done = 0
    last_stamp: str | None = None
    unread = 0
    # With --every, only what changed is read (an RFC 4533 refresh) where the directory
    # allows; the replica is read whole again every FULL_READ_EVERY refreshes.
    replica = DirectoryReplica() if interval is not None and not dry_run else None
    refreshed = 0
    while True:
        # With --every: a directory that says nothing changed (its contextCSN or
        # highestCommittedUSN) is not read again, but whole at least every FULL_READ_EVERY.
        stamp = _stamp(config) if interval is not None and not dry_run else None
        if stamp is not None and stamp == last_stamp and unread < FULL_READ_EVERY:
            unread += 1
            typer.echo(say("unchanged_directory", stamp=stamp.split(":")[0]))
            code, outcome = 0, outcome.next(ok=True)
        else:
            if replica is not None and refreshed >= FULL_READ_EVERY:
                replica, refreshed = DirectoryReplica(), 0
            code, outcome = _sync_once(
                admin, config, outcome, dry_run, max_removed_share, force, replica
            )
            last_stamp, unread, refreshed = (stamp if code == 0 else None), 0, refreshed + 1
        done += 1
        if (metrics_textfile or pushgateway) and not dry_run:
            try:
                export(outcome, textfile=metrics_textfile, pushgateway=pushgateway)
            except OSError as exc:
                typer.echo(say("metrics_not_exported", why=exc), err=True)
        if interval is None:
            raise typer.Exit(code)
        if count and done >= count:
            raise typer.Exit(0)
        _wait(config, interval, check_every if last_stamp is not None else 0, last_stamp)


def _wait(config: Path, interval: float, check_every: float, stamp: str | None) -> None:
    """Until the next sync: the interval, or less when the directory's stamp, asked every
    ``check_every`` seconds (0: never), is no longer ``stamp`` — a change is then synced at
    once. A stamp that cannot be read is no change: the interval's sync will say why."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        if check_every <= 0:
            time.sleep(left)
            return
        time.sleep(min(check_every, left))
        if time.monotonic() < deadline and _stamp(config) not in (None, stamp):
            return


def _unclaimed(admin: PolicyAdmin, tenant: str, name: str, roles: set[str]) -> list[str]:
    """``directory.unclaimed``, or nothing when it cannot be read (a note, never a failure)."""
    from retrieval_svc.directory import unclaimed

    try:
        return unclaimed(admin, tenant, name, roles)
    except PolicyError:
        return []


def _sync_once(
    admin: PolicyAdmin,
    config: Path,
    last: SyncOutcome,
    dry_run: bool,
    max_removed_share: float | None,
    force: bool,
    replica: DirectoryReplica | None = None,
) -> tuple[int, SyncOutcome]:
    """One sync, the file read anew; its exit code and outcome (messages on the way)."""
    from retrieval_svc.acl.history import Actor
    from retrieval_svc.directory import (
        BindRefused,
        DirectoryError,
        Limits,
        RemovalLimit,
        load_sync,
        planned,
        read_directory,
    )

    try:
        sync = load_sync(config)
        roles = sync.role_mapping()
    except DirectoryError as exc:
        typer.echo(say("error", what=said_again(exc)), err=True)
        return 2, last.next(ok=False, failure="invalid")
    admin.actor = Actor(sync.name, "ldap")
    was_usable = replica is not None and replica.usable
    try:
        directory = read_directory(sync, replica)
    except BindRefused as exc:  # a wrong DN or password: exit 3 too (the directory said no)
        said = say("bind_refused", url=exc.url, who=exc.who, env=exc.password_env)
        typer.echo(said, err=True)
        return 3, last.next(ok=False, failure="unreachable")
    except DirectoryError as exc:  # unreachable, cut off, refused: exit 3, as for a cluster
        typer.echo(say("error_nothing_changed", what=said_again(exc)), err=True)
        return 3, last.next(ok=False, failure="unreachable")
    if replica is not None and was_usable and not replica.usable:
        typer.echo(say("syncrepl_unavailable", reason=replica.reason), err=True)
    share = sync.max_removed_share if max_removed_share is None else max_removed_share
    limits = Limits(share, sync.removal_floor, force)
    read = say("read_from", users=len(directory.users), groups=len(directory.groups), url=sync.url)
    if replica is not None and replica.changed is not None:
        read += say("read_changed_usn" if directory.sids else "read_changed", n=replica.changed)
    elif replica is not None and directory.sids and replica.reason:
        read += say("read_whole_because", reason=replica.reason)
    if directory.disabled:
        read += say("disabled_left_out", n=directory.disabled)
    try:
        changes, before = planned(
            admin, sync.tenant, sync.name, directory, roles, limits, sync.renamed_from
        )
    except RemovalLimit as exc:  # the directory looks broken: say so, and in the history
        typer.echo(say("error", what=said_again(exc)), err=True)
        if not dry_run:
            admin.record(sync.tenant, "sync-ldap-refused", f"limit {exc.limit}: {exc} ({read})")
        return 4, last.next(ok=False, failure="limit")
    except (DirectoryError, PolicyError) as exc:  # what it read cannot be applied
        typer.echo(say("error_nothing_changed", what=said_again(exc)), err=True)
        return 2, last.next(ok=False, failure="invalid")
    for skipped in changes.skipped:
        typer.echo(say("sync_skipped", what=said_again(skipped)), err=True)
    for change in changes.changes:
        sign = "+" if change.op == "add" else "-"
        typer.echo(f"{sign} {csv_line('g', change.values)}")
    if dry_run:
        typer.echo(say("would_add", added=changes.added, removed=changes.removed, read=read))
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
            renamed_from=sync.renamed_from,
            sids=changes.sids,
            known_sids=changes.known_sids,
        )
    except PolicyError as exc:
        typer.echo(say("error_nothing_changed", what=said_again(exc)), err=True)
        return 2, last.next(ok=False, failure="invalid")
    # (``sid:`` roles an earlier version kept as policy lines are now each person's row)
    gone = sorted(r for r in set(before) - changes.owned if not r.startswith(SID_PREFIX))
    for old in _unclaimed(admin, sync.tenant, sync.name, set(before) | changes.owned):
        typer.echo(say("unclaimed_sync", old=old), err=True)
    typer.echo(
        say("synced", added=changes.added, removed=changes.removed, grants=changes.grants,
            read=read)
        + (say("no_longer_given", roles=", ".join(gone)) if gone else "")
        + (say("entries_skipped", n=len(changes.skipped)) if changes.skipped else "")
        + (say("ids_known", added=added, removed=removed) if added or removed else "")
        + (say("sids_held", people=len(changes.sids), sids=len(changes.known_sids))
           if changes.known_sids else "")
    )  # fmt: skip
    outcome = last.next(ok=True)
    outcome.added, outcome.removed, outcome.skipped = (
        changes.added,
        changes.removed,
        len(changes.skipped),
    )
    return 0, outcome
