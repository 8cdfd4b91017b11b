"""How to ask each provider: endpoint, headers and body (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ProviderName = Literal["bocha", "tavily", "baidu"]
Freshness = Literal["day", "week", "month", "year"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "bocha": "https://api.bochaai.com",
    "tavily": "https://api.tavily.com",
    "baidu": "https://qianfan.baidubce.com",
}

_BOCHA_FRESHNESS = {"day": "oneDay", "week": "oneWeek", "month": "oneMonth", "year": "oneYear"}
# Baidu has no one-day window; a week is the narrowest it offers.
_BAIDU_RECENCY = {"day": "week", "week": "week", "month": "month", "year": "year"}


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One HTTP request to a provider."""

    url: str
    headers: dict[str, str]
    json: dict[str, Any]


def build_request(
    provider: ProviderName,
    *,
    base_url: str,
    api_key: str,
    query: str,
    count: int,
    freshness: Freshness | None,
) -> ProviderRequest:
    """The request that asks ``provider`` for ``count`` results for ``query``."""
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    if provider == "bocha":
        body: dict[str, Any] = {
            "query": query,
            "summary": True,
            "count": count,
            "freshness": _BOCHA_FRESHNESS.get(freshness or "", "noLimit"),
        }
        return ProviderRequest(f"{base}/v1/web-search", headers, body)
    if provider == "tavily":
        body = {"query": query, "max_results": count, "search_depth": "basic"}
        if freshness:
            body["time_range"] = freshness
        return ProviderRequest(f"{base}/search", headers, body)
    body = {
        "messages": [{"role": "user", "content": query}],
        "search_source": "baidu_search_v2",
        "resource_type_filter": [{"type": "web", "top_k": count}],
    }
    if freshness:
        body["search_recency_filter"] = _BAIDU_RECENCY[freshness]
    return ProviderRequest(f"{base}/v2/ai_search/web_search", headers, body)
