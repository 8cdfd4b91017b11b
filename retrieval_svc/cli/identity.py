"""``retrieval-svc identity``: who a caller's user id is — the explicit map for ids no
directory holds (a Dify web app's end-user UUIDs), and what an id resolves to."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated

import typer

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import PolicyError
from retrieval_svc.acl.rule import DEFAULT_TENANT
from retrieval_svc.cli.policy import TenantOption, _admin, policy_database
from retrieval_svc.words import problem, say

identity_app = typer.Typer(
    help="Who a caller's user id is (the policy database, RSVC_CASBIN_DB_URL): the explicit "
    "map for ids no directory holds, and what an id resolves to.",
    no_args_is_help=True,
)
identity_app.callback()(policy_database)
map_app = typer.Typer(
    help="The explicit map: ids no directory holds → the person's directory id.",
    no_args_is_help=True,
)
identity_app.add_typer(map_app, name="map")

MAX_MAP_ROWS = 200_000


def _lines(file: Path) -> list[tuple[int, str, str]]:
    """The ``id,person`` lines of a CSV file with their line numbers as an editor shows them
    (a header ``id,person``, blank lines and ``#`` lines skipped); a line that is not two
    columns is a PolicyError naming it."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read {file}: {exc}") from None
    lines: list[tuple[int, str, str]] = []
    problems: list[str] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    for row in reader:
        number, start = start, reader.line_num + 1  # (a quoted cell may span lines)
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if not lines and not problems and [c.lower() for c in cells] == ["id", "person"]:
            continue
        if len(cells) != 2:
            problems.append(f"{file.name} line {number}: expected id,person ({len(cells)} columns)")
            continue
        lines.append((number, cells[0], cells[1]))
        if len(lines) > MAX_MAP_ROWS:
            raise PolicyError(f"{file.name}: more than {MAX_MAP_ROWS:,} ids")
    if problems:
        raise PolicyError("; ".join(problems[:20]))
    return lines


@map_app.command("import")
def import_map(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="CSV: id,person per line (a header allowed).")],
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Replace the tenant's map by FILE: each id (a Dify end-user UUID, an e-mail…) names the
    person (their directory id, as grants name them). Checked whole first; recorded in the
    permission history with every change."""
    admin = _admin(ctx)
    try:
        added, removed = admin.replace_map(tenant, _lines(file), file.name)
    except PolicyError as exc:
        typer.echo(say("error_map_unchanged", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    typer.echo(say("identity_map", tenant=tenant, added=added, removed=removed, file=file))


@map_app.command("list")
def list_map(ctx: typer.Context, tenant: TenantOption = DEFAULT_TENANT) -> None:
    """The tenant's map as the CSV ``import`` reads (a header, then id,person; ids are
    compared exactly, so they read back as imported)."""
    from retrieval_svc.acl import identities

    admin = _admin(ctx)
    with admin.store.engine().connect() as conn:
        pairs = identities.map_of(conn, tenant)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "person"])
    writer.writerows(pairs)
    typer.echo(out.getvalue(), nl=False)


@identity_app.command("resolve")
def resolve(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Argument(help="An id as a caller would send it.")],
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """What USER_ID resolves to in the tenant: a known person, another id of one, or no one
    (exit 1), as the service would decide it now."""
    admin = _admin(ctx)
    try:
        acl = AccessControl(source=admin.store)
    except PolicyError as exc:
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    found = acl.identify(user_id, tenant)
    roles = sorted(acl.user_roles(found.person, tenant)) if found.person else []
    via = say("resolved_via", how=found.via) if found.via else ""
    status = say(f"status_{found.status}")
    said = say("resolved", status=status, person=found.person or "-", via=via,
               roles=", ".join(roles) or "-")  # fmt: skip
    typer.echo(said)
    if found.unresolved:
        raise typer.Exit(1)
