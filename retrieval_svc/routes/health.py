"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from retrieval_svc.deps import StateDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
async def readyz(state: StateDep) -> JSONResponse:
    """Elasticsearch answers and the index alias exists."""
    alias = state.settings.index_alias
    try:
        ready = bool(await state.es.options(request_timeout=2).indices.exists_alias(name=alias))
        reason = "ok" if ready else f"index alias {alias!r} is missing"
    except Exception as exc:  # any failure to reach Elasticsearch means not ready
        ready, reason = False, f"Elasticsearch unreachable: {type(exc).__name__}"
    return JSONResponse({"ready": ready, "reason": reason}, status_code=200 if ready else 503)
