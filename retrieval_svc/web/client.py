"""Web search over the shared httpx client: one provider, a deadline, a small TTL cache.

A slow or failing provider never fails a request: the outcome says ``timeout`` or ``error``
(with a detail for logs, never the key) and carries no items.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Literal

import httpx
from cachetools import TTLCache

from retrieval_svc.metrics import Metrics
from retrieval_svc.web.items import PARSERS, ProviderResponseError, WebItem
from retrieval_svc.web.providers import (
    DEFAULT_BASE_URLS,
    Freshness,
    ProviderName,
    build_request,
)
from retrieval_svc.words import say

log = logging.getLogger(__name__)

WebStatus = Literal["ok", "disabled", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class WebOutcome:
    """What a web search did."""

    status: WebStatus
    provider: str | None = None
    took_ms: int = 0
    items: list[WebItem] = field(default_factory=list)
    detail: str = ""
    cached: bool = False


@dataclass(frozen=True, slots=True)
class WebConfig:
    """Provider, credentials and limits (from settings)."""

    provider: ProviderName | None
    api_key: str | None
    base_url: str | None = None
    timeout_s: float = 3.0
    max_results: int = 5
    freshness: Freshness | None = None
    cache_ttl_s: float = 60.0
    cache_size: int = 256


class WebSearch:
    """The configured web provider."""

    def __init__(
        self, http: httpx.AsyncClient, config: WebConfig, *, metrics: Metrics | None = None
    ) -> None:
        self._http = http
        self._config = config
        self._metrics = metrics
        self._cache: TTLCache[tuple[str, str, int, str], list[WebItem]] | None = (
            TTLCache(maxsize=config.cache_size, ttl=config.cache_ttl_s)
            if config.cache_ttl_s > 0
            else None
        )

    def _observe(self, provider: str, outcome: str, seconds: float) -> None:
        if self._metrics is not None:
            self._metrics.web_seconds.labels(provider=provider, outcome=outcome).observe(seconds)

    @property
    def enabled(self) -> bool:
        """Whether a provider and key are configured."""
        return self._config.provider is not None and bool(self._config.api_key)

    async def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        freshness: Freshness | None = None,
        timeout_s: float | None = None,
    ) -> WebOutcome:
        """Results for ``query``; never raises for provider trouble."""
        cfg = self._config
        if cfg.provider is None or not cfg.api_key:
            return WebOutcome(status="disabled")
        count = max_results or cfg.max_results
        fresh = freshness or cfg.freshness
        key = (cfg.provider, query, count, fresh or "")
        if self._cache is not None and key in self._cache:
            self._observe(cfg.provider, "cached", 0.0)
            return WebOutcome("ok", cfg.provider, 0, list(self._cache[key]), cached=True)
        request = build_request(
            cfg.provider,
            base_url=cfg.base_url or DEFAULT_BASE_URLS[cfg.provider],
            api_key=cfg.api_key,
            query=query,
            count=count,
            freshness=fresh,
        )
        budget = min(cfg.timeout_s, timeout_s) if timeout_s is not None else cfg.timeout_s
        started = time.perf_counter()

        def outcome(
            status: WebStatus, items: list[WebItem] | None = None, detail: str = ""
        ) -> WebOutcome:
            seconds = time.perf_counter() - started
            took = int(seconds * 1000)
            self._observe(cfg.provider or "", status, seconds)
            if detail:
                log.warning(say("log_web_search", provider=cfg.provider, detail=detail, ms=took))
            return WebOutcome(status, cfg.provider, took, items or [], detail)

        try:
            async with asyncio.timeout(max(budget, 0.001)):
                response = await self._http.post(
                    request.url, headers=request.headers, json=request.json
                )
        except TimeoutError:
            return outcome("timeout", detail=f"no answer within {budget:.2f} s")
        except httpx.TimeoutException:
            return outcome("timeout", detail="the HTTP client timed out")
        except httpx.HTTPError as exc:
            return outcome("error", detail=f"request failed: {type(exc).__name__}")
        if response.status_code != 200:
            return outcome("error", detail=f"HTTP {response.status_code}")
        try:
            items = PARSERS[cfg.provider](response.json())
        except ValueError as exc:  # JSON decoding errors and ProviderResponseError
            reason = str(exc) if isinstance(exc, ProviderResponseError) else "response is not JSON"
            return outcome("error", detail=reason)
        items = items[:count]
        if self._cache is not None:
            self._cache[key] = items
        return outcome("ok", items)
