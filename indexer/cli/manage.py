"""``retrieval-indexer init``, ``delete``, ``stats``, ``rebuild`` and ``show``: the index itself,
and what a knowledge base holds."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from elasticsearch import AsyncElasticsearch

from indexer import manage
from indexer.cli.common import (
    TenantOption,
    _tenant,
    app,
    before_writing,
    claim_cluster,
    err,
    open_embedder,
    run,
    settings_or_exit,
)
from retrieval_svc.acl import DEFAULT_TENANT
from retrieval_svc.search import inventory
from retrieval_svc.search.index import LEGACY_MESSAGE, ensure_configured_index, legacy_layout
from retrieval_svc.search.runs import forget_run, runs_shown
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import tenant_alias, tenant_of_slug
from retrieval_svc.words import passed_over, plural, reason, say


@app.command()
def init(tenant: TenantOption = DEFAULT_TENANT) -> None:
    """Apply the index template and create the tenant's first index if missing."""

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> str:
        await before_writing(es, settings)
        async with open_embedder(settings) as (_, model):
            return await ensure_configured_index(es, settings, model, tenant)

    settings = settings_or_exit()
    flavour = run(work, settings)
    alias = tenant_alias(settings.index_alias, tenant)
    typer.echo(say("index_ready", alias=alias, analysis=flavour))


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
        await before_writing(es, settings)
        alias = tenant_alias(settings.index_alias, tenant)
        if not await es.indices.exists_alias(name=alias):
            return 0, 0
        matching = await manage.count(es, alias, manage.delete_query(tenant, knowledge_id, ids))
        deleted = await manage.delete(es, alias, tenant, knowledge_id, ids) if yes else 0
        if yes and not ids:  # the whole knowledge base: its last run goes too
            await forget_run(es, settings.index_alias, tenant, knowledge_id)
        return matching, deleted

    matching, deleted = run(work)
    if not matching:
        typer.echo(say("nothing_to_delete", tenant=tenant, kb=knowledge_id))
        return
    if not yes:
        typer.echo(say("nothing_deleted", n=matching))
        return
    typer.echo(say("deleted_chunks", n=deleted))


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
        async with open_embedder(settings) as (embedder, model):
            how = manage.Rebuild(
                keep_old=keep_old,
                progress=lambda n: err.print(f"copied {n} chunks"),
                embedder=embedder,
                model=model,
                vector_index_type=settings.vector_index_type,
                shards=settings.index_shards,
                replicas=settings.index_replicas,
                installation=settings.installation,
            )
            await claim_cluster(es, settings)
            if await legacy_layout(es, settings.index_alias):
                return [await manage.split_legacy(es, settings.index_alias, how)]
            aliases = await manage.tenant_aliases(es, settings.index_alias)
            prefix = f"{settings.index_alias}."
            tenants = [tenant] if tenant else [tenant_of_slug(a[len(prefix) :]) for a in aliases]
            return [await manage.rebuild(es, settings.index_alias, t, how) for t in tenants]

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


@app.command()
def show(
    knowledge_id: Annotated[str, typer.Option(help="Knowledge base to show.")],
    tenant: TenantOption = DEFAULT_TENANT,
    document: Annotated[
        str | None,
        typer.Option(help="A document's id or file name: print its chunks as stored."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What a knowledge base holds: each document's format, pages, pages read by OCR and
    chunks, and what the last run failed or passed over; with --document, its chunks."""

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> dict[str, Any]:
        own = tenant_alias(settings.index_alias, tenant)
        listing = await inventory.documents_of(es, own, tenant, knowledge_id)
        runs = await runs_shown(es, settings.index_alias, tenant, [knowledge_id])
        out: dict[str, Any] = {**listing, "last_run": runs.get(knowledge_id)}
        if document is not None:
            wanted = next(
                (
                    d["document_id"]
                    for d in listing["documents"]
                    if document in (d["document_id"], d["name"])
                ),
                document,
            )
            out["chunks"] = await inventory.chunks_of(es, own, tenant, knowledge_id, wanted)
        return out

    out = run(work)
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False))
        return
    if document is not None:
        if not out["chunks"]:
            typer.echo(
                say("no_document", document=repr(document), tenant=tenant, kb=knowledge_id),
                err=True,
            )
            raise typer.Exit(1)
        for chunk in out["chunks"]:
            marks = [" > ".join(chunk["headings"])] if chunk["headings"] else []
            if chunk["ocr_confidence"] is not None:
                marks.append(f"OCR {chunk['ocr_confidence']:.2f}")
            if chunk["page"] is not None:
                marks.append(f"page {chunk['page']}")
            marks.append("roles: " + (", ".join(chunk["access_roles"]) or "public"))
            if chunk["roles_set_by"]:
                marks.append(f"set by {chunk['roles_set_by']}")
            typer.echo(f"── #{chunk['position']}  {' · '.join(marks)}")
            typer.echo(chunk["content"])
        return
    docs = out["documents"]
    more = say("first_shown", n=len(docs)) if out["more"] else ""
    typer.echo(say("kb_documents", kb=f"{tenant}/{knowledge_id}", total=out["total"], more=more))
    for source in out.get("sources", []):
        name = source["source"] or say("legacy_source")
        typer.echo(say("from_source", source=name, n=source["documents"]))
    for d in docs:
        pages = say("pages", n=d["pages"], s=plural(d["pages"])) if d["pages"] else ""
        ocr = say("ocr_pages", n=d["ocr_pages"]) if d["ocr_pages"] else ""
        roles = say("restricted") if d["restricted"] else ""
        typer.echo(
            say("doc_line", name=d["name"], format=d["format"] or "?", pages=pages, ocr=ocr,
                chunks=d["chunks"], s=plural(d["chunks"]), roles=roles, title=d["title"],
                id=d["document_id"])
        )  # fmt: skip
    last = out["last_run"] or {}
    if shards := last.get("shards"):
        missing = ", ".join(map(str, shards["missing"]))
        typer.echo(
            f"  last run: {shards['reported']} of {shards['count']} shards reported, finished "
            f"{shards['first_finished_at'][:19]} to {last['finished_at'][:19]}; "
            f"{last.get('documents_seen', 0)} seen, {last.get('documents_indexed', 0)} indexed, "
            f"{last.get('documents_failed', 0)} failed"
            + (f" (no record of shard {missing})" if missing else "")
        )
    if last.get("documents_withdrawn") or last.get("documents_pruned"):
        typer.echo(
            say(
                "last_run_removed",
                pruned=last.get("documents_pruned", 0),
                withdrawn=last.get("documents_withdrawn", 0),
            )
        )
    for w in last.get("watchers", []):
        lag = w.get("lag_narrowed_s")
        typer.echo(
            f"  watcher{' of shard ' + w['shard'] if w.get('shard') else ''}: {w.get('state')}, "
            f"heartbeat {str(w.get('finished_at'))[:19]}, last event "
            f"{str(w.get('last_event_at') or '-')[:19]}, last re-listing "
            f"{str(w.get('last_relisting_at') or '-')[:19]}"
            + (f", last change in force {lag:.1f} s after it was heard" if lag is not None else "")
            + (f"; last error: {w['last_error']}" if w.get("last_error") else "")
        )
    for held in last.get("leases", []):
        slot = "" if held.get("slot") == "*" else f" {held.get('slot')}"
        typer.echo(
            say("lease_line", source=f"{held.get('source')}{slot}", holder=held.get("name"),
                role=held.get("role"), host=held.get("host"), pid=held.get("pid"),
                until=str(held.get("expires_at") or "")[:19])
        )  # fmt: skip
    for failure in last.get("failures", []):
        typer.echo(
            say("failed_item", document=failure["document"], reason=reason(failure["reason"]))
        )
    for item in last.get("fail_closed", []):
        examples = ", ".join(item.get("examples", []))
        typer.echo(say("fail_closed", count=item["count"], sid=item["sid"], examples=examples))
    for item in last.get("passed_over", []):
        examples = ", ".join(item.get("examples", []))
        typer.echo(
            say("passed_over_item", count=item["count"], reason=passed_over(item["reason"]),
                examples=examples)
        )  # fmt: skip
