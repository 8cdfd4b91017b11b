"""The application factory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from zoneinfo import ZoneInfo

import httpx
from elasticsearch import ApiError, TransportError
from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry, start_http_server

from retrieval_svc import __version__
from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.policy_store import PolicyError
from retrieval_svc.audit import Audit
from retrieval_svc.auth.key_file import KeyFile
from retrieval_svc.auth.keys import KeyStore
from retrieval_svc.auth.oidc import OidcVerifier
from retrieval_svc.causes import cause
from retrieval_svc.config_checks import shown_url
from retrieval_svc.deps import authenticate
from retrieval_svc.direct import DirectRoutes
from retrieval_svc.embedding import (
    EmbeddingError,
    EmbeddingModel,
    ModelMismatch,
    QueryCache,
    embedder_config,
    make_embedder,
)
from retrieval_svc.error_handlers import install_error_handlers
from retrieval_svc.errors import (
    ConfigurationError,
)
from retrieval_svc.limits import (
    BodyLimitMiddleware,
    CollapseSlashesMiddleware,
    InternalErrorMiddleware,
    NoStoreMiddleware,
)
from retrieval_svc.mcp import McpRoutes, OidcTokens, build_mcp
from retrieval_svc.metrics import Metrics, exposition_registry, multiprocess, watch_event_loop
from retrieval_svc.observability import ObservabilityMiddleware, configure_logging
from retrieval_svc.parts import hybrid_config, oidc_config, policy_source, rerank_config, web_config
from retrieval_svc.routes import citations, console_off, dify, explain, health, merge, search, tools
from retrieval_svc.search.catalog import CatalogCache
from retrieval_svc.search.client import make_es_client
from retrieval_svc.search.engine import SearchEngine
from retrieval_svc.search.index import (
    LEGACY_MESSAGE,
    check_index_model,
    ensure_configured_index,
    legacy_layout,
)
from retrieval_svc.search.installation import ForeignIndices, claim
from retrieval_svc.search.rerank import Reranker
from retrieval_svc.search.segment import preload as preload_segmenter
from retrieval_svc.settings import Settings
from retrieval_svc.state import AppState
from retrieval_svc.web.client import WebSearch
from retrieval_svc.words import say

log = logging.getLogger(__name__)


# Libraries whose DEBUG output carries request bodies or headers (queries, document content,
# credentials). They stay at WARNING whatever level the root logger is set to, so turning on
# debug logging can never leak content or secrets.
_QUIET_LIBRARIES = ("elastic_transport", "elasticsearch", "httpx", "httpcore")


def app_from_environment() -> FastAPI:
    """The app with settings from the environment: what each worker of
    ``retrieval-svc serve --workers N`` builds (``uvicorn --factory``), in a process of its own
    whose logging is set up here (as ``serve`` sets up its own: JSON lines, uvicorn's said in
    words)."""
    configure_logging()
    return create_app(Settings())


def create_app(settings: Settings) -> FastAPI:
    """A configured app; clients open and close with its lifespan."""
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    # The transport's per-retry warnings (each with a traceback) would fill the log while the
    # cluster is down; the engine says it once when it goes and once when it is back.
    logging.getLogger("elastic_transport").setLevel(logging.ERROR)
    metrics = Metrics()

    tokens = OidcTokens()
    mcp, mcp_transport = build_mcp(settings, tokens) if settings.mcp_auth != "off" else (None, None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.auth_disabled:
            log.warning(say("log_auth_disabled"))
        async with AsyncExitStack() as stack:  # a refused start still closes what it opened
            app.state.rsvc = await open_state(settings, metrics, stack)
            if mcp is not None:
                await stack.enter_async_context(mcp.session_manager.run())
            yield

    docs = settings.api_docs  # /docs, /redoc, /openapi.json: an operator's choice
    app = FastAPI(
        title="retrieval-svc",
        version=__version__,
        description="Permission-aware retrieval for Dify, backed by Elasticsearch.",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    install_error_handlers(app)
    # Innermost: a bug's exception is answered here, below the log and metrics middlewares,
    # so they see the 500 and the connection stays open.
    app.add_middleware(InternalErrorMiddleware)
    # Next: the retrieval routes, answered without FastAPI's per-request
    # work (direct.py); every other route and method goes on to FastAPI.
    # Every POST with a body: the key is checked before the body is read, and every error
    # has the one shape (FastAPI would parse the body first, and answer its own shape).
    direct = (
        dify.retrieval,
        search.search,
        tools.unified_search,
        merge.merge_chunks,
        citations.resolve_citations,
        explain.explain,
    )
    app.add_middleware(
        DirectRoutes,
        routes=[
            route
            for router in (
                dify.router,
                search.router,
                tools.router,
                merge.router,
                citations.router,
                explain.router,
            )
            for route in router.routes
            if isinstance(route, APIRoute) and route.endpoint in direct
        ],
    )
    if mcp_transport is not None:  # /mcp: the same pipeline over MCP (design.md §13)
        app.add_middleware(McpRoutes, settings=settings, transport=mcp_transport, tokens=tokens)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(ObservabilityMiddleware, metrics=metrics)
    app.add_middleware(NoStoreMiddleware)
    if settings.console:  # its security headers on every answer under /console
        from retrieval_svc.console.headers import ConsoleHeaders

        app.add_middleware(ConsoleHeaders)
    app.add_middleware(CollapseSlashesMiddleware)  # outermost: routes and metrics see /retrieval
    app.include_router(health.router)
    if settings.metrics in ("open", "key"):
        keyed = [Depends(authenticate)] if settings.metrics == "key" else []
        app.include_router(health.metrics_router, dependencies=keyed)
    app.include_router(dify.router)
    app.include_router(search.router)
    app.include_router(tools.router)
    app.include_router(merge.router)
    app.include_router(citations.router)
    app.include_router(explain.router)
    if settings.scim:  # SCIM 2.0 (off by default; keys with "scim": true; a policy database)
        from retrieval_svc.acl.policy_store import PolicyDatabase
        from retrieval_svc.scim import ScimGateway

        assert settings.casbin_db_url is not None  # (config_checks refuses RSVC_SCIM without)
        store = PolicyDatabase(settings.casbin_model, settings.casbin_db_url.get_secret_value())
        app.mount("/scim", ScimGateway(store, settings.scim_roles), name="scim")
    if settings.console:  # the operator's console (off by default; admin keys only)
        from fastapi.staticfiles import StaticFiles

        from retrieval_svc import console

        app.include_router(console.router)
        app.mount("/console/static", StaticFiles(directory=console.STATIC), name="console-static")
    else:  # (a page that says how to turn it on, not a bare 404)
        app.include_router(console_off.router)
    return app


async def open_state(settings: Settings, metrics: Metrics, stack: AsyncExitStack) -> AppState:
    """Open the clients, load the policy and the model, check the index; ``stack`` closes them.

    Raises ConfigurationError when the service must not start (unreadable policy, model
    server unreachable, an index built for another embedding model).
    """

    def reloaded(outcome: str) -> None:
        metrics.policy_reloads.labels(outcome=outcome).inc()
        if outcome == "ok":
            metrics.policy_loaded.set_to_current_time()

    try:
        acl = AccessControl(
            source=policy_source(settings),
            check_interval_s=settings.policy_check_interval_s,
            on_reload=reloaded,
            on_skipped=metrics.policy_lines_skipped.set,
        )
    except PolicyError as exc:
        raise ConfigurationError(f"cannot load the access policy: {exc}") from exc
    metrics.policy_loaded.set_to_current_time()
    background(stack, acl.watch(), "policy-watcher")
    background(stack, watch_event_loop(metrics.event_loop_lag), "event-loop-lag")
    if settings.metrics == "port" and not multiprocess():  # (with workers: `serve` does)
        stack.callback(serve_metrics(metrics.registry, settings.host, settings.metrics_port))
    es = make_es_client(settings, timeout_s=settings.request_deadline_s)
    stack.push_async_callback(es.close)
    http = httpx.AsyncClient(timeout=settings.request_deadline_s)
    stack.push_async_callback(http.aclose)
    embedder = make_embedder(embedder_config(settings), http)
    model: EmbeddingModel | None = None
    if embedder is not None:
        stack.push_async_callback(embedder.aclose)
        try:
            model = await embedder.describe()
        except EmbeddingError as exc:
            raise ConfigurationError(f"cannot reach the embedding model: {exc}") from exc
    await asyncio.to_thread(preload_segmenter)  # (the word dictionary: before any query)
    # Which cluster it writes to, said once at start (never a password in the URL).
    cluster = ", ".join(shown_url(url) for url in settings.es_hosts)
    writes_to = say(
        "writes_to", cluster=cluster, alias=settings.index_alias, installation=settings.installation
    )
    log.warning(
        "%s", say("serves_tenants", writes_to=writes_to, tenants=", ".join(settings.tenants))
    )
    try:
        if await legacy_layout(es, settings.index_alias):
            raise ConfigurationError(LEGACY_MESSAGE.format(alias=settings.index_alias))
        if settings.manage_index:
            for tenant in settings.tenants:
                await ensure_configured_index(es, settings, model, tenant)
        else:
            await claim(
                es,
                settings.index_alias,
                settings.installation,
                adopt=settings.installation_adopt,
                stamp=False,
            )
            await check_index_model(es, settings.index_alias, model)
    except ModelMismatch as exc:
        raise ConfigurationError(str(exc)) from exc
    except ForeignIndices as exc:
        what = say(
            "foreign_indices",
            index=exc.index,
            alias=exc.alias,
            cluster=cluster,
            owner=exc.owner,
            ours=exc.ours,
        )
        raise ConfigurationError(what) from exc
    except (ApiError, TransportError) as exc:
        log.warning(say("log_index_not_prepared", why=cause(exc) or exc))
    audit = Audit(settings, es, metrics)
    await audit.start()
    stack.push_async_callback(audit.stop)
    engine = SearchEngine(
        es,
        alias=settings.index_alias,
        saturation=settings.score_saturation,
        deadline_s=settings.request_deadline_s,
        metrics=metrics,
        hybrid=hybrid_config(settings),
    )
    catalog = CatalogCache(engine, ZoneInfo(settings.timezone))
    stack.push_async_callback(catalog.close)
    keys = KeyStore(settings.api_keys)
    key_file = KeyFile(settings, keys) if settings.api_keys_file else None
    if key_file is not None:  # (reloaded like the policy: no restart for a key file edit)
        background(stack, key_file.watch(settings.policy_check_interval_s), "keys-watcher")
    return AppState(
        settings=settings,
        es=es,
        http=http,
        keys=keys,
        key_file=key_file,
        engine=engine,
        catalog=catalog,
        acl=acl,
        web=WebSearch(http, web_config(settings), metrics=metrics),
        metrics=metrics,
        audit=audit,
        embedder=embedder,
        embedding_model=model,
        query_vectors=QueryCache(embedder, settings.query_cache_size) if embedder else None,
        reranker=Reranker(http, rerank_config(settings)) if settings.rerank_url else None,
        oidc=OidcVerifier(
            http,
            oidc_config(settings),
            on_fetch=lambda outcome: metrics.oidc_key_fetches.labels(outcome=outcome).inc(),
        )
        if settings.oidc_issuer
        else None,
    )


def background(stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str) -> None:
    """Run ``work`` as a task for the app's lifetime; ``stack`` cancels it at shutdown."""
    task = asyncio.create_task(work, name=name)

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    stack.push_async_callback(stop)


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> Callable[[], None]:
    """Serve ``registry`` (every worker's values in multiprocess mode) on ``host:port`` from a
    thread; returns the function that stops it."""
    try:
        server, thread = start_http_server(port, addr=host, registry=exposition_registry(registry))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror}); "
            "set RSVC_METRICS_PORT to a free port"
        ) from exc
    log.info(say("log_metrics_on", host=host, port=port))

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
