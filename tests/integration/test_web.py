"""Each web provider against a local server speaking its real format (design.md §10)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from retrieval_svc.web.client import WebConfig, WebSearch
from retrieval_svc.web.providers import ProviderName
from tests.support import app_client, auth, make_settings
from tests.support.corpus import SAMPLES_KB
from tests.support.fake_provider import SLOW_S, FakeProvider

pytestmark = pytest.mark.anyio

PROVIDERS: list[ProviderName] = ["bocha", "tavily", "baidu"]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def web(
    http: httpx.AsyncClient, provider: FakeProvider, name: ProviderName, **kw: object
) -> WebSearch:
    config = WebConfig(
        provider=name,
        api_key="sk-secret-provider-key",
        base_url=provider.url,
        **{"timeout_s": 2.0, "cache_ttl_s": 0, **kw},  # type: ignore[arg-type]
    )
    return WebSearch(http, config)


async def test_bocha_maps_to_standard_items(
    http: httpx.AsyncClient, provider: FakeProvider
) -> None:
    out = await web(http, provider, "bocha").search("物业巡检", max_results=5, freshness="week")
    assert out.status == "ok" and out.provider == "bocha"
    first, second, third = out.items
    assert first == {
        "title": "物业巡检流程标准 - 知乎",
        "url": "https://www.zhihu.com/question/123/answer/456",
        # summary wins over snippet
        "content": "物业巡检一般分为日常巡检、专项巡检、应急巡检三类。",
        "site_name": "知乎",
        "published_date": "2025-08-12T10:00:00+08:00",
        "score": 0.0,
    }
    assert second["content"] == "巡检制度范本：巡检人员应……"  # empty summary → snippet
    assert second["published_date"] == "2024-12-01T00:00:00Z"  # dateLastCrawled fallback
    assert third["content"] == ""  # kept here; the merge drops empties
    sent = provider.requests[0]
    assert sent["headers"]["authorization"] == "Bearer sk-secret-provider-key"
    assert sent["json"] == {
        "query": "物业巡检",
        "summary": True,
        "count": 5,
        "freshness": "oneWeek",
    }


async def test_tavily_maps_directly(http: httpx.AsyncClient, provider: FakeProvider) -> None:
    out = await web(http, provider, "tavily").search("物业巡检", max_results=2, freshness="month")
    assert out.status == "ok"
    assert out.items[0]["score"] == 0.91 and out.items[0]["published_date"] == "2025-03-04"
    assert out.items[1]["published_date"] == ""
    assert provider.requests[0]["json"]["time_range"] == "month"
    assert provider.requests[0]["json"]["max_results"] == 2


async def test_baidu_maps_website_date_and_authority(
    http: httpx.AsyncClient, provider: FakeProvider
) -> None:
    out = await web(http, provider, "baidu").search("物业巡检", max_results=3, freshness="day")
    assert out.status == "ok"
    assert [i["site_name"] for i in out.items] == ["百度百科", ""]  # the image reference is skipped
    assert [i["published_date"] for i in out.items] == ["2025-4-24", "2025-04-27 18:02:00"]
    assert out.items[0]["score"] == 0.87
    body = provider.requests[0]["json"]
    assert body["resource_type_filter"] == [{"type": "web", "top_k": 3}]
    assert body["search_recency_filter"] == "week"  # Baidu has no one-day window
    assert body["messages"] == [{"role": "user", "content": "物业巡检"}]


@pytest.mark.parametrize("name", PROVIDERS)
async def test_empty(http: httpx.AsyncClient, provider: FakeProvider, name: ProviderName) -> None:
    provider.reset("empty")
    out = await web(http, provider, name).search("q")
    assert (out.status, out.items) == ("ok", [])


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(
    ("behaviour", "status", "detail"),
    [
        pytest.param("slow", "timeout", "no answer", id="slow"),
        pytest.param("429", "error", "HTTP 429", id="rate-limited"),
        pytest.param("500", "error", "HTTP 500", id="server-error"),
        pytest.param("garbage", "error", "not JSON", id="garbage"),
        pytest.param("error-body", "error", "", id="error-in-200-body"),
    ],
)
async def test_failures_become_a_status(
    http: httpx.AsyncClient,
    provider: FakeProvider,
    name: ProviderName,
    behaviour: str,
    status: str,
    detail: str,
) -> None:
    provider.reset(behaviour)
    out = await web(http, provider, name).search("q")
    assert out.status == status
    assert out.items == []
    assert detail in out.detail
    assert "sk-secret-provider-key" not in out.detail
    assert out.took_ms < SLOW_S * 1000 / 2  # never waits for a slow provider


async def test_baidu_error_code_in_200(http: httpx.AsyncClient, provider: FakeProvider) -> None:
    provider.reset("error-body")
    out = await web(http, provider, "baidu").search("q")
    assert out.status == "error" and "216003" in out.detail


async def test_unreachable_provider(http: httpx.AsyncClient) -> None:
    config = WebConfig(provider="tavily", api_key="k", base_url="http://127.0.0.1:9", timeout_s=1)
    out = await WebSearch(http, config).search("q")
    assert out.status == "error" and "ConnectError" in out.detail


async def test_the_deadline_caps_the_provider_timeout(
    http: httpx.AsyncClient, provider: FakeProvider
) -> None:
    # The provider's own timeout is long; the request's remaining deadline is what cuts it.
    provider.reset("ok", delay_s=SLOW_S)
    out = await web(http, provider, "tavily", timeout_s=60).search("q", timeout_s=0.05)
    assert out.status == "timeout" and out.took_ms < SLOW_S * 1000 / 2


async def test_disabled_without_provider(http: httpx.AsyncClient) -> None:
    out = await WebSearch(http, WebConfig(provider=None, api_key=None)).search("q")
    assert out.status == "disabled"


async def test_identical_queries_are_cached(
    http: httpx.AsyncClient, provider: FakeProvider
) -> None:
    search = web(http, provider, "bocha", cache_ttl_s=60)
    first = await search.search("物业巡检")
    second = await search.search("物业巡检")
    other = await search.search("电梯维保")
    assert (first.cached, second.cached, other.cached) == (False, True, False)
    assert second.items == first.items
    assert len(provider.requests) == 2


async def test_failures_are_not_cached(http: httpx.AsyncClient, provider: FakeProvider) -> None:
    search = web(http, provider, "bocha", cache_ttl_s=60)
    provider.reset("500")
    assert (await search.search("q")).status == "error"
    provider.reset("ok")
    assert (await search.search("q")).status == "ok"


@pytest.mark.anyio
async def test_search_says_why_web_results_are_missing(corpus: str) -> None:
    async with app_client(make_settings(corpus)) as c:
        resp = await c.post(
            "/v1/search",
            json={"query": "巡更", "knowledge_ids": [SAMPLES_KB], "web": {"enabled": True}},
            headers=auth("anon"),
        )
    web = resp.json()["meta"]["web"]
    assert web["status"] == "disabled" and "no provider is configured" in web["detail"], web
