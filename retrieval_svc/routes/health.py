"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from retrieval_svc.deps import StateDep
from retrieval_svc.search.index import tenant_indices
from retrieval_svc.tenancy import tenant_alias

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
async def readyz(state: StateDep) -> JSONResponse:
    """Elasticsearch answers, every tenant's index alias exists, and every primary shard
    behind them is assigned: a yellow cluster (a replica missing, e.g. a node lost) is ready,
    a red one is not, with the reason."""
    settings = state.settings
    wanted = {tenant_alias(settings.index_alias, t) for t in settings.tenants}
    es = state.es.options(request_timeout=2)
    status = None
    try:
        held = await es.options(ignore_status=404).indices.get_alias(
            name=tenant_indices(settings.index_alias)
        )
        present = {
            a for body in held.values() if isinstance(body, dict) for a in body.get("aliases", {})
        }
        missing = sorted(wanted - present)
        if missing:
            ready, reason = False, f"index aliases missing: {', '.join(missing[:5])}"
        else:
            health = await es.cluster.health(index=sorted(wanted), timeout="1s")
            status = str(health["status"])
            ready = status != "red"
            if ready:
                reason = "ok" if status == "green" else "ok (yellow: a replica is unassigned)"
            else:
                reason = (
                    "cluster red: a primary shard of a tenant's index is unassigned "
                    f"({health['unassigned_shards']} unassigned shards, "
                    f"{health['number_of_nodes']} nodes)"
                )
    except Exception as exc:  # any failure to reach Elasticsearch means not ready
        ready, reason = False, f"Elasticsearch unreachable: {type(exc).__name__}"
    body: dict[str, object] = {"ready": ready, "reason": reason, "cluster_status": status}
    if state.key_file is not None:  # (which version of the keys file is in force)
        body["api_keys_file"] = state.key_file.view()
    return JSONResponse(body, status_code=200 if ready else 503)


# /metrics on the API port: the app includes this router when RSVC_METRICS is "open", and
# with the API-key dependency when it is "key".
metrics_router = APIRouter(tags=["operations"])


@metrics_router.get("/metrics", response_model=None)
async def metrics(state: StateDep) -> Response:
    """Prometheus metrics."""
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
