"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from retrieval_svc.deps import ApiKeyDep, StateDep

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


def _metrics(state: StateDep) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


# /metrics on the API port, chosen by RSVC_METRICS (the app includes at most one of these).
open_metrics = APIRouter(tags=["operations"])
keyed_metrics = APIRouter(tags=["operations"])


@open_metrics.get("/metrics", response_model=None)
async def metrics(state: StateDep) -> Response:
    """Prometheus metrics."""
    return _metrics(state)


@keyed_metrics.get("/metrics", response_model=None)
async def metrics_with_key(state: StateDep, _key: ApiKeyDep) -> Response:
    """Prometheus metrics, for a caller with an API key."""
    return _metrics(state)
