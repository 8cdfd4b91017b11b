"""``retrieval-svc audit search``: who retrieved a document, or what a user retrieved;
``retrieval-svc audit policy``: who changed which permission."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from elasticsearch import ApiError, TransportError

from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError
from retrieval_svc.audit import Audit
from retrieval_svc.causes import cause
from retrieval_svc.cli.config import load_settings
from retrieval_svc.errors import ServiceError
from retrieval_svc.metrics import Metrics
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.tenant_reads import TenantReads
from retrieval_svc.tenancy import check_tenant
from retrieval_svc.words import cli_language, es_refused, problem, say

audit_app = typer.Typer(
    help="Read the audit trail (RSVC_AUDIT=elasticsearch): who retrieved what, and when.",
    no_args_is_help=True,
)
_SPAN = re.compile(r"^(\d+)([dhm])$")


def since_time(value: str) -> datetime:
    """``7d``, ``24h``, ``30m`` ago, or an ISO date/time (UTC unless it says)."""
    if match := _SPAN.match(value.strip()):
        amount, unit = int(match[1]), match[2]
        try:
            span = {"d": timedelta(days=amount), "h": timedelta(hours=amount)}.get(
                unit, timedelta(minutes=amount)
            )
            return datetime.now(UTC) - span
        except OverflowError:  # (99999999d: before year 1)
            raise typer.BadParameter(f"{value!r} reaches back before the year 1") from None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(f"{value!r}: say 7d, 24h, 30m or an ISO date") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _checked(tenant: str | None) -> None:
    """Refuse a --tenant that is not a tenant's name."""
    if tenant is not None:
        try:
            check_tenant(tenant)
        except ValueError as exc:
            raise typer.BadParameter(problem(exc)) from None


@audit_app.command("search")
def search(
    document: Annotated[
        str | None, typer.Option(help="Events that returned this document.")
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            help="Events whose subject (the user whose permissions applied) is this user id."
        ),
    ] = None,
    actor: Annotated[
        str | None, typer.Option(help="Events by this actor: key:<name> or console:<admin key>.")
    ] = None,
    since: Annotated[str, typer.Option(help="How far back: 7d, 24h, 30m or an ISO date.")] = "7d",
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's trail.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Events a page, at most.")] = 100,
    page: Annotated[
        int, typer.Option(min=1, help="Which page of --limit events (1: the newest).")
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
) -> None:
    """Events, newest first, since --since: that returned --document, of the subject --user,
    by --actor; the most recent --limit of all when none is named (--page for older ones)."""
    if page * limit > 10_000:
        raise typer.BadParameter("--page × --limit reaches past 10,000 events: narrow --since")
    settings = load_settings(serving=False)
    _checked(tenant)
    moment = since_time(since)

    async def fetch() -> tuple[list[dict[str, Any]], dict[str, str]]:
        es = make_es_client(settings)
        try:
            metrics = Metrics()
            audit = Audit(settings, es, metrics)
            found = await audit.search(
                tenant=tenant,
                document=document,
                user=user,
                actor=actor,
                since=moment,
                limit=limit,
                offset=(page - 1) * limit,
            )
            reads = TenantReads(es, alias=settings.index_alias, deadline_s=30, metrics=metrics)
            titles: dict[str, str] = {}
            for name in sorted({e["tenant"] for e in found}):  # each tenant's own index
                ids = [d for e in found if e["tenant"] == name for d in e["documents"]]
                try:
                    titles |= await reads.titles_of(name, ids)
                except ServiceError:  # (its index is gone: the ids alone)
                    pass
            return found, titles
        finally:
            await es.close()

    try:
        events, titles = asyncio.run(fetch())
    except ApiError as exc:
        said = es_refused(settings.es_url, exc)
        typer.echo(said, err=True)
        raise typer.Exit(3) from None
    except TransportError as exc:
        why = cause(exc, cli_language()) or type(exc).__name__
        typer.echo(say("es_unreachable", url=settings.es_url, cause=why), err=True)
        raise typer.Exit(3) from None
    for event in events:
        named = [f"{titles.get(d, '—')} ({d})" for d in event["documents"]]
        if as_json:
            known = {d: titles[d] for d in event["documents"] if d in titles}
            typer.echo(json.dumps({**event, "document_titles": known}, ensure_ascii=False))
            continue
        typer.echo(
            f"{event['@timestamp'][:19]}Z  {event['tenant']}  "
            f"actor={event.get('actor') or 'key:' + event['key']}  "
            f"subject={event.get('user') or '-'}  {event.get('route') or '-'}  "
            f"kbs={','.join(event['knowledge_ids'])}  docs={'; '.join(named) or '-'}  "
            f"chunks={len(event['chunks'])}  request={event.get('request_id') or '-'}"
        )
    if not events:
        typer.echo("no events", err=True)


@audit_app.command("policy")
def policy_history(
    since: Annotated[str, typer.Option(help="How far back: 7d, 24h, 30m or an ISO date.")] = "7d",
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's changes.")] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            help="Changes touching this user (user:<id>), role or knowledge-base pattern."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Events, at most.")] = 100,
    lines: Annotated[
        int, typer.Option(min=0, max=100_000, help="Changed lines shown per event.")
    ] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON lines, every changed line.")
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="RSVC_CASBIN_DB_URL",
            help="SQLAlchemy URL of the policy database.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Every change to the policy since --since, newest first: when, actor, source (cli,
    console, ldap, scim), tenant, action, counts and the lines added (+) and removed (-).
    Read from the policy database, where each change is recorded in its own transaction."""
    if not db:
        typer.echo(say("history_no_db"), err=True)
        raise typer.Exit(2)
    _checked(tenant)
    moment = since_time(since)
    store = PolicyDatabase(DEFAULT_MODEL, db)
    try:
        events = store.history(
            since=moment,
            tenant=tenant,
            subject=subject,
            limit=limit,
            with_changes=100_000 if as_json else lines,
        )
    except PolicyError as exc:
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(3) from None
    for event in events:
        if as_json:
            typer.echo(json.dumps(event.as_json(), ensure_ascii=False))
            continue
        typer.echo(
            f"{event.at.astimezone(UTC).isoformat()[:19]}Z  {event.tenant}  "
            f"actor={event.actor}  source={event.source}  {event.action}"
            f"{'  ' + event.detail if event.detail else ''}  +{event.added} -{event.removed}"
        )
        for change in event.changes:
            mark = "+" if change.op == "add" else "-"
            typer.echo(f"    {mark} {change.ptype}, {', '.join(change.values)}")
        if len(event.changes) < event.added + event.removed:
            typer.echo(f"    … {event.added + event.removed - len(event.changes)} more (--lines)")
    if not events:
        typer.echo("no changes", err=True)
