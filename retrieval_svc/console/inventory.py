"""The console's pages of what the index holds (design.md §14, §15): *Knowledge bases* — their
documents, chunks, restricted share and the indexer's last run — and *Documents*, one
knowledge base's documents as the indexer left them and a document's chunks as stored."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.console.pages import _guarded, router
from retrieval_svc.deps import StateDep
from retrieval_svc.search.runs import runs_shown


@router.get("/knowledge-bases")
async def knowledge_bases(request: Request, state: StateDep) -> Response:
    """Documents and chunks per knowledge base, the restricted share, the embedding model,
    when it was last indexed, what the indexer's last run could not index, and the last
    requests refused on the retrieval routes by key and reason (what Dify shows as nothing)."""

    async def work(key: ApiKeyConfig, _form: dict[str, str]) -> dict[str, Any]:
        overview = await state.engine.tenant_overview(key.tenant)
        kbs = overview["knowledge_bases"]
        ids = [kb["knowledge_id"] for kb in kbs]
        runs = await runs_shown(state.es, state.settings.index_alias, key.tenant, ids)
        model = state.embedding_model
        return {
            "kbs": kbs,
            "runs": runs,
            "model": model.model if model else "-",
            "refusals": state.refusals.recent(key.tenant),
        }

    return await _guarded(request, state, "knowledge-bases", work)


@router.get("/documents")
async def documents(request: Request, state: StateDep) -> Response:
    """A knowledge base's documents as the indexer left them (format, pages, pages read by
    OCR, chunks), what its last run failed or passed over, and one document's chunks as
    stored (``?kb=…&document=…``): the operator's check of a parse."""

    async def work(key: ApiKeyConfig, form: dict[str, str]) -> dict[str, Any]:
        kb = (form.get("kb") or "").strip()
        if not kb:
            raise ValueError("kb: which knowledge base (its id, from the Knowledge bases page)")
        listing = await state.engine.documents_of(key.tenant, kb)
        runs = await runs_shown(state.es, state.settings.index_alias, key.tenant, [kb])
        out: dict[str, Any] = {"kb": kb, "listing": listing, "run": runs.get(kb)}
        wanted = (form.get("document") or "").strip()
        if wanted:
            out["document"] = wanted
            out["chunks"] = await state.engine.chunks_of(key.tenant, kb, wanted)
        return out

    return await _guarded(request, state, "documents", work)
