"""``retrieval-indexer``: load documents into the chunk index."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from indexer.chunking import ChunkOptions
from indexer.pipeline import IndexJob, Report, index_folder
from retrieval_svc.search.index import ensure_index
from retrieval_svc.settings import ElasticsearchSettings
from retrieval_svc.state import make_es_client

app = typer.Typer(
    help="Load documents into retrieval-svc's chunk index.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.command()
def init() -> None:
    """Apply the index template and create the alias's first index if missing."""
    settings = ElasticsearchSettings()

    async def run() -> str:
        es = make_es_client(settings)
        try:
            return await ensure_index(es, settings.index_alias)
        finally:
            await es.close()

    typer.echo(f"index alias {settings.index_alias} ready (analysis: {asyncio.run(run())})")


@app.command()
def index(
    source: Annotated[Path, typer.Argument(help="A local folder of .md / .txt documents.")],
    knowledge_id: Annotated[str, typer.Option(help="Knowledge base id (Dify's knowledge_id).")],
    dataset_name: Annotated[str, typer.Option(help="Knowledge base display name.")] = "",
    chunk_size: Annotated[int, typer.Option(help="Most characters per chunk.")] = 600,
    chunk_overlap: Annotated[int, typer.Option(help="Characters repeated between chunks.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Index a folder into a knowledge base; exit 1 if any document failed."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    settings = ElasticsearchSettings()
    job = IndexJob(
        source=source,
        knowledge_id=knowledge_id,
        dataset_name=dataset_name or knowledge_id,
        alias=settings.index_alias,
        options=ChunkOptions(max_chars=chunk_size, overlap_chars=chunk_overlap),
    )

    async def run() -> Report:
        es = make_es_client(settings)
        try:
            await ensure_index(es, settings.index_alias)
            return await index_folder(es, job)
        finally:
            await es.close()

    report = asyncio.run(run())
    if as_json:
        typer.echo(json.dumps({"ok": report.ok, **asdict(report)}, ensure_ascii=False))
    else:
        typer.echo(
            f"indexed {report.documents_indexed} documents ({report.chunks_indexed} chunks), "
            f"{len(report.failures)} failed, {report.stale_chunks_deleted} stale chunks removed"
        )
        for failure in report.failures:
            typer.echo(f"  failed: {failure['document']}: {failure['reason']}", err=True)
    raise typer.Exit(0 if report.ok else 1)
