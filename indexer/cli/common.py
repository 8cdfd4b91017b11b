"""What the ``retrieval-indexer`` commands share: the app, settings, the client run with
its one-line errors, the embedder, the tenant option."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, TypeVar

import httpx
import typer
from elasticsearch import ApiError, AsyncElasticsearch
from elasticsearch import ConnectionError as ESConnectionError
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console

from retrieval_svc.causes import cause
from retrieval_svc.config_checks import shown_url
from retrieval_svc.config_words import settings_error
from retrieval_svc.embedding import (
    Embedder,
    EmbeddingError,
    EmbeddingModel,
    ModelMismatch,
    embedder_config,
    make_embedder,
)
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.index import LEGACY_MESSAGE, legacy_layout
from retrieval_svc.search.installation import ForeignIndices, claim
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import check_tenant
from retrieval_svc.words import cli_language, es_refused, problem, say

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
    except (ValidationError, SettingsError) as exc:
        typer.echo(settings_error(exc), err=True)
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
        why = cause(exc, cli_language()) or getattr(exc, "message", None) or type(exc).__name__
        typer.echo(say("es_unreachable", url=settings.es_url, cause=why), err=True)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except ApiError as exc:
        if _debug:
            raise
        said = es_refused(settings.es_url, exc)
        typer.echo(said, err=True)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except EmbeddingError as exc:
        if _debug:
            raise
        said = say("embedder_error", what=problem(exc), embedder=settings.embedder)
        typer.echo(said, err=True)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except ModelMismatch as exc:
        if _debug:
            raise
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    except ForeignIndices as exc:
        if _debug:
            raise
        typer.echo(say("error", what=foreign(exc, settings)), err=True)
        raise typer.Exit(2) from None


def cluster(settings: IndexSettings) -> str:
    """The cluster's node URLs as a line may show them (no user or password)."""
    return ", ".join(shown_url(url) for url in settings.es_hosts)


def foreign(exc: ForeignIndices, settings: IndexSettings) -> str:
    """The refusal of another installation's indices, in the reader's language."""
    return say(
        "foreign_indices",
        index=exc.index,
        alias=exc.alias,
        cluster=cluster(settings),
        owner=exc.owner,
        ours=exc.ours,
    )


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


async def claim_cluster(es: AsyncElasticsearch, settings: IndexSettings) -> None:
    """Say which cluster this command writes to (one stderr line, no credentials); refuse
    (``ForeignIndices``) when the indices under the alias are another installation's."""
    said = say(
        "writes_to",
        cluster=cluster(settings),
        alias=settings.index_alias,
        installation=settings.installation,
    )
    # (through the console a progress bar draws on, so the line is not drawn into the bar)
    err.print(said, markup=False, highlight=False)
    await claim(
        es,
        settings.index_alias,
        settings.installation,
        adopt=settings.installation_adopt,
        stamp=False,
    )


async def before_writing(es: AsyncElasticsearch, settings: IndexSettings) -> None:
    """``claim_cluster``; exit 2 with what to do while the index is in the shared layout of
    earlier versions."""
    await claim_cluster(es, settings)
    if await legacy_layout(es, settings.index_alias):
        typer.echo(f"error: {LEGACY_MESSAGE.format(alias=settings.index_alias)}", err=True)
        raise typer.Exit(2)
