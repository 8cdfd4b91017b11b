"""``retrieval-indexer index``: load a source into a knowledge base, and the summary it
prints."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from elasticsearch import AsyncElasticsearch
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from indexer.budget import Budget
from indexer.cli.common import (
    TenantOption,
    app,
    before_writing,
    err,
    open_embedder,
    run,
)
from indexer.cli.fence import holding
from indexer.cli.prepare import OcrChoice, prepare
from indexer.convergence import keep_run, prune_decision, rules_changed_event
from indexer.formats.convert import INSTALL
from indexer.lease import DEFAULT_TTL_S, MAX_TTL_S
from indexer.metrics import export as export_metrics
from indexer.pipeline import index_source
from indexer.report import Report
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.search.index import ensure_configured_index
from retrieval_svc.search.runs import last_runs
from retrieval_svc.settings import IndexSettings
from retrieval_svc.words import again, passed_over, reason, say

PRUNE_NOTES = ("not_pruned", "pruned_own", "pruned_asked", "not_pruned_dry", "not_pruned_asked")


def print_report(report: Report, as_json: bool) -> None:
    """The run's summary, for people or machines."""
    if as_json:
        typer.echo(json.dumps(report.as_json(), ensure_ascii=False))
        return
    verb = say("verb_would_index" if report.dry_run else "verb_indexed")
    embedded = say("embedded", n=report.chunks_embedded) if report.chunks_embedded else ""
    retagged = say("retagged", n=report.documents_retagged) if report.documents_retagged else ""
    # Short lines, never wrapped by rich mid-phrase (soft_wrap leaves wrapping to the terminal).
    lines = [
        "[bold]" + say("indexed", verb=verb, documents=report.documents_indexed,
                       chunks=report.chunks_indexed, embedded=embedded,
                       seconds=f"{report.duration_s:.1f}") + "[/]",
        say("skipped", skipped=report.documents_skipped, retagged=retagged,
            failed=f"[red]{report.documents_failed}[/]", pruned=report.documents_pruned,
            withdrawn=report.documents_withdrawn, stale=report.stale_chunks_deleted),
        say("seen", seen=report.documents_seen, bytes=f"{report.bytes_read:,}"),
    ]  # fmt: skip
    if report.prune_note:
        lines.append(again(report.prune_note, *PRUNE_NOTES))
    if report.passed_over:  # never a silent skip: what the listing passed over, and why
        ranked = sorted(report.passed_over.items(), key=lambda kv: (-kv[1], kv[0]))
        total = sum(n for _, n in ranked)
        said = ", ".join(f"{passed_over(r)} {n}" for r, n in ranked)
        lines.append(escape(say("passed_over", total=total, reasons=said)))
    for sid, n in sorted(report.fail_closed.items()):  # (never a silent narrowing either)
        examples = ", ".join(report.fail_closed_examples.get(sid, []))
        lines.append(escape(say("fail_closed", count=n, sid=sid, examples=examples)))
    for line in lines:
        err.print(line, soft_wrap=True)
    for failure in report.failures:
        err.print(escape(say("failed_item", document=failure["document"],
                             reason=reason(failure["reason"]))), soft_wrap=True)  # fmt: skip
    if wanting := report.needs_libreoffice:
        ranked = sorted(wanting.items(), key=lambda kv: (-kv[1], kv[0]))
        suffixes = ", ".join(f"{suffix} {n}" for suffix, n in ranked)
        line = say("need_libreoffice", n=sum(wanting.values()), suffixes=suffixes, install=INSTALL)
        err.print("[red]" + escape(line) + "[/]", soft_wrap=True)


DEFAULT_BUDGET = Budget()


@app.command()
def index(
    source: Annotated[
        str,
        typer.Argument(
            help="oss://bucket/prefix, s3://bucket/prefix, smb://server/share/folder or a folder."
        ),
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
    acl_rules: Annotated[
        Path | None,
        typer.Option(
            help="Folder rules (YAML): access_roles by glob over object keys; see "
            "docs/permissions.md. Checked whole before anything is written.",
            dir_okay=False,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Index only shard I of N of SOURCE (I from 0): every object is in exactly one "
            "shard, the same on every run; pruning touches this shard's documents only. A "
            "Kubernetes indexed Job sets it from JOB_COMPLETION_INDEX and RSVC_INDEXER_SHARDS.",
            show_default=False,
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            help="Never index keys matching this glob (as in folder rules: '**/archive/**', "
            "'*.bak'); repeatable. Passed over and counted, never failed. Lock, temporary and "
            "system files (~$*.docx, Thumbs.db…) are always passed over.",
            show_default=False,
        ),
    ] = None,
    roles_tag: Annotated[
        str | None,
        typer.Option(
            help="Read access_roles from this object tag (S3/OSS tagging; roles separated by "
            "spaces). One request per object per run.",
        ),
    ] = None,
    share_sidecars: Annotated[
        bool,
        typer.Option(
            "--share-sidecars",
            help="smb:// only: read <file>.meta.json sidecars. Off by default: on a share, "
            "anyone who may create a file in a folder could write one and retitle, narrow or "
            "hide documents they cannot change. Turn on only where sidecars' writers are the "
            "documents' writers.",
        ),
    ] = False,
    source_name: Annotated[
        str | None,
        typer.Option(
            help="The name each document records of the source it came from (default: the "
            "folder's absolute path, or the bucket URL). A run prunes only its own source's "
            "documents; set it to keep a source's documents across a move of its folder.",
            show_default=False,
        ),
    ] = None,
    chunk_size: Annotated[int, typer.Option(help="Most characters per chunk.")] = 600,
    chunk_overlap: Annotated[int, typer.Option(help="Characters repeated between chunks.")] = 0,
    prune: Annotated[
        bool | None,
        typer.Option(
            "--prune/--no-prune",
            help="Delete documents of the knowledge base that SOURCE no longer holds (moved, "
            "deleted, renamed). Default: on when the knowledge base's last run read this same "
            "SOURCE; otherwise off, and the summary says why.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Re-index unchanged documents too.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Parse and chunk, write nothing.")] = False,
    concurrency: Annotated[
        int, typer.Option(min=1, max=32, help="Documents read and parsed at once.")
    ] = 4,
    memory_mb: Annotated[
        int,
        typer.Option(
            min=256, help="The run's memory bound (MB): workers and --doc-memory-mb fit in it."
        ),
    ] = 1024,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=64,
            help="Worker processes that parse under the time and memory limits [the cores "
            "given, at most 8, as many as --memory-mb holds]; 0 parses in this process, with "
            "the size limits only.",
        ),
    ] = None,
    doc_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds one document may take to parse and chunk.")
    ] = DEFAULT_BUDGET.seconds,
    doc_memory_mb: Annotated[
        int | None,
        typer.Option(
            min=32, help="Memory (MB) one document may take in its worker [from --memory-mb]."
        ),
    ] = None,
    max_doc_bytes: Annotated[
        int, typer.Option(min=1, help="Largest object read, in bytes (checked before reading).")
    ] = DEFAULT_BUDGET.max_bytes,
    max_unpacked_bytes: Annotated[
        int, typer.Option(min=1, help="Most bytes an Office (zip) file may unpack to.")
    ] = DEFAULT_BUDGET.max_unpacked_bytes,
    max_chars: Annotated[
        int, typer.Option(min=1, help="Most characters of text in one document.")
    ] = DEFAULT_BUDGET.max_chars,
    max_pages: Annotated[
        int, typer.Option(min=1, help="Most pages of a PDF or TIFF, slides, or sheets.")
    ] = DEFAULT_BUDGET.max_pages,
    max_pixels: Annotated[
        int, typer.Option(min=1, help="Most pixels of an image or a page read by OCR.")
    ] = DEFAULT_BUDGET.max_pixels,
    ocr: Annotated[
        OcrChoice,
        typer.Option(
            help="Read pages without a text layer, and images, by OCR: auto (those pages "
            "only), off (never: such files fail), force (every PDF page)."
        ),
    ] = OcrChoice.auto,
    ocr_page_seconds: Annotated[
        float, typer.Option(min=0.1, help="Seconds added to --doc-timeout per page read by OCR.")
    ] = DEFAULT_BUDGET.ocr_page_seconds,
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
    lease_ttl: Annotated[
        float,
        typer.Option(
            min=3.0,
            max=MAX_TTL_S,
            help="Seconds the source's lease lasts unrenewed: every writer of a source and "
            "shard (a run, a watcher) holds it while it writes; one that dies is waited for "
            "this long (its own successor takes over at once).",
        ),
    ] = DEFAULT_TTL_S,
    lease_wait: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Seconds a run waits for its source's lease (a watcher steps aside within "
            "seconds; another run holds it until it ends); then it writes nothing and exits 4.",
        ),
    ] = 3600.0,
) -> None:
    """Index SOURCE into a knowledge base; exit 1 if any document failed."""
    prepared = prepare(dict(locals()))
    settings, options, src, rules, part = (
        prepared.settings,
        prepared.options,
        prepared.src,
        prepared.rules,
        prepared.shard,
    )
    run_id = knowledge_id if part is None else part.run_id(knowledge_id)
    # (a shard's last run is its own record: it prunes by the source its own last run read)

    show = sys.stderr.isatty() and not as_json
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed} {task.fields[unit]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=not show, transient=True) as bar:
        task = bar.add_task(
            say("progress_reading", source=escape(src.description)),
            total=None,
            unit=say("progress_documents"),
        )

        async def work(es: AsyncElasticsearch, settings: IndexSettings) -> Report:
            async with open_embedder(settings) as (embedder, model):
                if not dry_run:
                    await before_writing(es, settings)
                    await ensure_configured_index(es, settings, model, tenant)
                embedding = (
                    bar.add_task(
                        say("progress_embedding", model=escape(model.model)),
                        total=None,
                        unit=say("progress_chunks"),
                    )
                    if model and not dry_run
                    else None
                )
                last = (await last_runs(es, settings.index_alias, tenant, [run_id])).get(run_id, {})
                decided, note = prune_decision(options, src, prune)
                async with holding(es, settings, options, src, lease_ttl, lease_wait) as lease:
                    guard, stamp = (lease.check, lease.version) if lease else (None, None)
                    report = await index_source(
                        es,
                        src,
                        replace(options, prune=decided, guard=guard, stamp=stamp),
                        progress=lambda _name: bar.advance(task),
                        embedder=None if dry_run else embedder,
                        embed_progress=(lambda n: bar.advance(embedding, n)) if embedding else None,
                    )
                report.prune_note = report.prune_note or note
                if not dry_run:
                    await keep_run(es, settings.index_alias, tenant, report, rules, part)
                    if warning := rules_changed_event(settings, tenant, report, rules, last):
                        typer.echo(say("warning", what=warning), err=True)
                return report

        report = run(work, settings)
    print_report(report, as_json)
    for warning in rules.summary() if rules and not as_json else []:
        typer.echo(f"warning: {warning}", err=True)
    if metrics_textfile or pushgateway:
        try:
            export_metrics(report, textfile=metrics_textfile, pushgateway=pushgateway, shard=part)
        except OSError as exc:
            typer.echo(say("metrics_not_exported", why=exc), err=True)
    raise typer.Exit(0 if report.ok else 1)
