"""``retrieval-indexer``: load documents into the chunk index and manage it."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from elasticsearch import ApiError, AsyncElasticsearch
from elasticsearch import ConnectionError as ESConnectionError
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from indexer import manage
from indexer.chunking import ChunkOptions
from indexer.metrics import export as export_metrics
from indexer.pipeline import IndexOptions, Report, index_source
from indexer.sources import ObjectStoreOptions, open_source
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.config_checks import describe_errors
from retrieval_svc.embedding import (
    Embedder,
    EmbeddingError,
    EmbeddingModel,
    ModelMismatch,
    embedder_config,
    make_embedder,
)
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.index import LEGACY_MESSAGE, ensure_configured_index, legacy_layout
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import check_tenant, tenant_alias, tenant_of_slug

app = typer.Typer(
    help="Load documents into retrieval-svc's chunk index.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
# soft_wrap: lines are never broken by rich (piped output has 80 columns); the terminal wraps.
err = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")

# Exit codes (docs/indexer.md): 0 done, 1 some documents failed, 2 bad input or configuration,
# 3 Elasticsearch or the embedding model unreachable.
EXIT_UNREACHABLE = 3
_debug = False


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    """Load documents into retrieval-svc's chunk index."""
    global _debug
    _debug = debug
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.ERROR, handlers=[handler], force=True
    )
    # The transport's retry chatter ("node failed, putting on timeout") is noise in a CLI: the
    # one-line error says what happened; --debug shows it. Never DEBUG: at that level these
    # libraries log request bodies and headers (documents, credentials).
    for name in ("elastic_transport", "elasticsearch", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING if debug else logging.CRITICAL)


def _tenant(value: str) -> str:
    try:
        return check_tenant(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


TenantOption = Annotated[
    str,
    typer.Option(
        "--tenant",
        callback=_tenant,
        help="Tenant that owns the knowledge base (the API keys' tenant); it has its own index.",
    ),
]


def settings_or_exit() -> IndexSettings:
    """The environment's settings, or a one-line error and exit 2."""
    try:
        return IndexSettings()
    except ValidationError as exc:
        typer.echo(f"configuration error: {describe_errors(exc)}", err=True)
        raise typer.Exit(2) from None


def run(
    work: Callable[[AsyncElasticsearch, IndexSettings], Awaitable[T]],
    settings: IndexSettings | None = None,
) -> T:
    """Run ``work(es, settings)`` with a client from the settings (read from the environment
    unless given).

    An unreachable cluster or model server is one line with the cause and what to do (exit 3),
    a refused model mismatch one line too (exit 2); ``--debug`` shows the traceback.
    """
    settings = settings or settings_or_exit()

    async def main() -> T:
        es = make_es_client(settings)
        try:
            return await work(es, settings)
        finally:
            await es.close()

    try:
        return asyncio.run(main())
    except ESConnectionError as exc:
        if _debug:
            raise
        cause = getattr(exc, "message", None) or type(exc).__name__
        typer.echo(
            f"error: Elasticsearch at {settings.es_url} is unreachable ({cause}). Start the local "
            "one with `scripts/es.sh start`, or point RSVC_ES_URL at your cluster.",
            err=True,
        )
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except ApiError as exc:
        if _debug:
            raise
        typer.echo(
            f"error: Elasticsearch at {settings.es_url} refused the request: {exc.meta.status} "
            f"{exc.error} ({exc.message}). --debug shows the details.",
            err=True,
        )
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except EmbeddingError as exc:
        if _debug:
            raise
        typer.echo(f"error: {exc} (RSVC_EMBEDDER={settings.embedder})", err=True)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except ModelMismatch as exc:
        if _debug:
            raise
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@asynccontextmanager
async def open_embedder(
    settings: IndexSettings,
) -> AsyncIterator[tuple[Embedder | None, EmbeddingModel | None]]:
    """The configured embedder and its model (both None for RSVC_EMBEDDER=none)."""
    async with httpx.AsyncClient() as http:
        embedder = make_embedder(embedder_config(settings), http)
        try:
            yield embedder, (await embedder.describe() if embedder else None)
        finally:
            if embedder is not None:
                await embedder.aclose()


def load_manifest(path: Path | None) -> dict[str, dict[str, Any]]:
    """A JSON Lines manifest: one object per document with a ``path`` key."""
    if path is None:
        return {}
    entries: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise typer.BadParameter(f"{path}:{number}: needs an object with a 'path' string")
        entries[entry["path"].lstrip("/")] = entry
    return entries


def print_report(report: Report, as_json: bool) -> None:
    """The run's summary, for people or machines."""
    if as_json:
        typer.echo(json.dumps({"ok": report.ok, **asdict(report)}, ensure_ascii=False))
        return
    verb = "would index" if report.dry_run else "indexed"
    embedded = f", {report.chunks_embedded} embedded" if report.chunks_embedded else ""
    # Short lines, never wrapped by rich mid-phrase (soft_wrap leaves wrapping to the terminal).
    lines = [
        f"[bold]{verb} {report.documents_indexed}[/] documents "
        f"({report.chunks_indexed} chunks{embedded}) in {report.duration_s:.1f} s",
        f"skipped {report.documents_skipped} unchanged, [red]{report.documents_failed} failed[/], "
        f"{report.documents_pruned} pruned, {report.stale_chunks_deleted} stale chunks removed",
        f"{report.documents_seen} documents seen, {report.bytes_read:,} bytes read",
    ]
    for line in lines:
        err.print(line, soft_wrap=True)
    for failure in report.failures:
        err.print(f"  [red]failed[/] {escape(failure['document'])}: {escape(failure['reason'])}")


@app.command()
def init(tenant: TenantOption = DEFAULT_TENANT) -> None:
    """Apply the index template and create the tenant's first index if missing."""

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> str:
        await refuse_legacy(es, settings)
        async with open_embedder(settings) as (_, model):
            return await ensure_configured_index(es, settings, model, tenant)

    settings = settings_or_exit()
    flavour = run(work, settings)
    alias = tenant_alias(settings.index_alias, tenant)
    typer.echo(f"index alias {alias} ready (analysis: {flavour})")


async def refuse_legacy(es: AsyncElasticsearch, settings: IndexSettings) -> None:
    """Exit 2 with what to do while the index is in the shared layout of earlier versions."""
    if await legacy_layout(es, settings.index_alias):
        typer.echo(f"error: {LEGACY_MESSAGE.format(alias=settings.index_alias)}", err=True)
        raise typer.Exit(2)


@app.command()
def index(
    source: Annotated[
        str, typer.Argument(help="oss://bucket/prefix, s3://bucket/prefix or a folder.")
    ],
    knowledge_id: Annotated[str, typer.Option(help="Knowledge base id (Dify's knowledge_id).")],
    tenant: TenantOption = DEFAULT_TENANT,
    dataset_name: Annotated[str, typer.Option(help="Knowledge base display name.")] = "",
    manifest: Annotated[
        Path | None,
        typer.Option(
            help="JSON Lines metadata, one object per document with 'path'.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    url_template: Annotated[
        str | None, typer.Option(help="source_file_url from {key} {uri} {bucket} {name}.")
    ] = None,
    chunk_size: Annotated[int, typer.Option(help="Most characters per chunk.")] = 600,
    chunk_overlap: Annotated[int, typer.Option(help="Characters repeated between chunks.")] = 0,
    prune: Annotated[
        bool, typer.Option(help="Delete documents of the knowledge base not in SOURCE.")
    ] = False,
    force: Annotated[bool, typer.Option(help="Re-index unchanged documents too.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Parse and chunk, write nothing.")] = False,
    concurrency: Annotated[
        int, typer.Option(min=1, max=32, help="Documents read and parsed at once.")
    ] = 4,
    endpoint: Annotated[
        str | None, typer.Option(help="Object store endpoint [OSS_ENDPOINT / AWS_ENDPOINT_URL].")
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="Object store region [OSS_REGION / AWS_REGION].")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON on stdout.")
    ] = False,
    metrics_textfile: Annotated[
        Path | None, typer.Option(help="Write run metrics here (node-exporter textfile).")
    ] = None,
    pushgateway: Annotated[
        str | None,
        typer.Option(help="Push run metrics to this Pushgateway.", envvar="RSVC_PUSHGATEWAY_URL"),
    ] = None,
) -> None:
    """Index SOURCE into a knowledge base; exit 1 if any document failed."""
    settings = settings_or_exit()
    try:
        options = IndexOptions(
            knowledge_id=knowledge_id,
            alias=tenant_alias(settings.index_alias, tenant),
            tenant=tenant,
            timezone=settings.timezone,
            dataset_name=dataset_name,
            chunk=ChunkOptions(max_chars=chunk_size, overlap_chars=chunk_overlap),
            url_template=url_template,
            manifest=load_manifest(manifest),
            prune=prune,
            force=force,
            dry_run=dry_run,
            concurrency=concurrency,
        )
        src = open_source(source, ObjectStoreOptions(endpoint=endpoint, region=region))
    except (ValueError, NotADirectoryError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    show = sys.stderr.isatty() and not as_json
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed} {task.fields[unit]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=not show, transient=True) as bar:
        task = bar.add_task(f"reading {escape(src.description)}", total=None, unit="documents")

        async def work(es: AsyncElasticsearch, settings: IndexSettings) -> Report:
            async with open_embedder(settings) as (embedder, model):
                if not dry_run:
                    await refuse_legacy(es, settings)
                    await ensure_configured_index(es, settings, model, tenant)
                embedding = (
                    bar.add_task(f"embedding ({model.model})", total=None, unit="chunks")
                    if model and not dry_run
                    else None
                )
                return await index_source(
                    es,
                    src,
                    options,
                    progress=lambda _name: bar.advance(task),
                    embedder=None if dry_run else embedder,
                    embed_progress=(lambda n: bar.advance(embedding, n)) if embedding else None,
                )

        report = run(work, settings)
    print_report(report, as_json)
    if metrics_textfile or pushgateway:
        try:
            export_metrics(report, textfile=metrics_textfile, pushgateway=pushgateway)
        except OSError as exc:
            typer.echo(f"warning: could not export metrics: {exc}", err=True)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def delete(
    knowledge_id: Annotated[str, typer.Option(help="Knowledge base to delete from.")],
    tenant: TenantOption = DEFAULT_TENANT,
    document_id: Annotated[
        list[str] | None, typer.Option(help="Only these documents (repeatable).")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Really delete; without it, only count.")
    ] = False,
) -> None:
    """Delete a knowledge base's chunks, or some documents'."""
    ids = document_id or []

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> tuple[int, int]:
        await refuse_legacy(es, settings)
        alias = tenant_alias(settings.index_alias, tenant)
        if not await es.indices.exists_alias(name=alias):
            return 0, 0
        matching = await manage.count(es, alias, manage.delete_query(tenant, knowledge_id, ids))
        deleted = await manage.delete(es, alias, tenant, knowledge_id, ids) if yes else 0
        return matching, deleted

    matching, deleted = run(work)
    if not matching:
        typer.echo(f"no chunks of {tenant}/{knowledge_id} match; nothing to delete")
        return
    if not yes:
        typer.echo(f"{matching} chunks match; nothing deleted (pass --yes to delete them)")
        return
    typer.echo(f"deleted {deleted} chunks")


@app.command()
def stats(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every tenant's index and counts per knowledge base."""
    out = run(lambda es, settings: manage.stats(es, settings.index_alias))
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False))
        return
    if out["legacy"]:
        typer.echo(f"warning: {LEGACY_MESSAGE.format(alias=out['alias'])}")
    typer.echo(f"{len(out['tenants'])} tenants under {out['alias']} (analysis: {out['analysis']})")
    for own, indices in out["tenants"].items():
        typer.echo(f"  {own} → {', '.join(indices)}")
    models = {
        f"{m['model']} ({m['dims']} dimensions)" if m else "none (BM25 only)"
        for m in out["embedding"].values()
    }
    typer.echo(f"embedding: {', '.join(sorted(models)) or '-'}")
    typer.echo(f"{out['chunks']} chunks")
    for kb in out["knowledge_bases"]:
        typer.echo(
            f"  {kb['tenant']}/{kb['knowledge_id']}: {kb['documents']} documents, "
            f"{kb['chunks']} chunks ({kb['restricted_chunks']} restricted), "
            f"last indexed {kb['last_indexed']}"
        )


@app.command()
def rebuild(
    tenant: Annotated[
        str | None,
        typer.Option(help="Only this tenant's index (default: every tenant's)."),
    ] = None,
    keep_old: Annotated[bool, typer.Option(help="Keep the old index after the swap.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Copy each tenant's index into a new one from the current template and swap its alias.

    In the shared layout of earlier versions (every tenant in one index behind the alias
    itself), this splits it: each tenant's chunks into an index of its own.
    """
    if tenant is not None:
        _tenant(tenant)

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> list[dict[str, Any]]:
        layout: dict[str, Any] = {
            "vector_index_type": settings.vector_index_type,
            "shards": settings.index_shards,
            "replicas": settings.index_replicas,
        }
        async with open_embedder(settings) as (embedder, model):
            progress = lambda n: err.print(f"copied {n} chunks")  # noqa: E731
            if await legacy_layout(es, settings.index_alias):
                split = await manage.split_legacy(
                    es,
                    settings.index_alias,
                    keep_old=keep_old,
                    progress=progress,
                    embedder=embedder,
                    model=model,
                    **layout,
                )
                return [split]
            aliases = await manage.tenant_aliases(es, settings.index_alias)
            prefix = f"{settings.index_alias}."
            tenants = [tenant] if tenant else [tenant_of_slug(a[len(prefix) :]) for a in aliases]
            return [
                await manage.rebuild(
                    es,
                    settings.index_alias,
                    t,
                    keep_old=keep_old,
                    progress=progress,
                    embedder=embedder,
                    model=model,
                    **layout,
                )
                for t in tenants
            ]

    outs = run(work)
    if as_json:
        typer.echo(json.dumps(outs[0] if len(outs) == 1 else outs))
        return
    for out in outs:
        if "split" in out:
            for own, done in out["split"].items():
                typer.echo(f"alias {own} now → {done['index']} ({done['chunks']} chunks)")
            kept = " kept (without its alias)" if keep_old else " deleted"
            typer.echo(f"shared index {', '.join(out['old'])}{kept}")
            continue
        typer.echo(
            f"alias {out['alias']} now → {out['new']} ({out['chunks']} chunks); "
            f"old: {', '.join(out['old']) or '-'}{' kept' if keep_old else ' deleted'}"
        )
