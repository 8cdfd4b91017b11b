"""Provider responses mapped to the standard web item (pure: no I/O).

Standard item: ``{title, url, content, site_name, published_date, score}``.
A response that is not the provider's format, or that reports an error in its body, raises
:class:`ProviderResponseError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from retrieval_svc.chunks import text


class WebItem(TypedDict):
    """One web result in the standard form."""

    title: str
    url: str
    content: str
    site_name: str
    published_date: str
    score: float


class ProviderResponseError(ValueError):
    """The provider answered, but not with results."""


def _score(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 0.0
    try:
        return float(value)
    except ValueError:
        return 0.0


def _list(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProviderResponseError(f"{where} is not a list")
    return [v for v in value if isinstance(v, dict)]


def bocha_items(body: Any) -> list[WebItem]:
    """Bocha ``/v1/web-search``: ``data.webPages.value[]``; ``code`` other than 200 is an error."""
    if not isinstance(body, dict):
        raise ProviderResponseError("Bocha answered with something other than a JSON object")
    code = body.get("code", 200)
    if code not in (200, "200", None):
        raise ProviderResponseError(f"Bocha error {code}: {body.get('msg') or body.get('message')}")
    data = body.get("data")
    if not isinstance(data, dict):
        raise ProviderResponseError("Bocha response has no data object")
    pages = data.get("webPages") or {}
    if not isinstance(pages, dict):
        raise ProviderResponseError("Bocha data.webPages is not an object")
    return [
        WebItem(
            title=text(v.get("name")),
            url=text(v.get("url")),
            content=text(v.get("summary")) or text(v.get("snippet")),
            site_name=text(v.get("siteName")),
            published_date=text(v.get("datePublished")) or text(v.get("dateLastCrawled")),
            score=_score(v.get("score")),
        )
        for v in _list(pages.get("value"), "Bocha data.webPages.value")
    ]


def tavily_items(body: Any) -> list[WebItem]:
    """Tavily ``/search``: ``results[]`` with the standard fields already."""
    if not isinstance(body, dict) or "results" not in body:
        detail = body.get("detail") if isinstance(body, dict) else None
        raise ProviderResponseError(f"Tavily response has no results: {detail or 'bad format'}")
    return [
        WebItem(
            title=text(v.get("title")),
            url=text(v.get("url")),
            content=text(v.get("content")),
            site_name="",
            published_date=text(v.get("published_date")),
            score=_score(v.get("score")),
        )
        for v in _list(body.get("results"), "Tavily results")
    ]


def baidu_items(body: Any) -> list[WebItem]:
    """Baidu AI search: ``references[]``; a 200 answer with ``code`` set is an error."""
    if not isinstance(body, dict):
        raise ProviderResponseError("Baidu answered with something other than a JSON object")
    code = body.get("code")
    if code not in (None, 0, "0", ""):
        raise ProviderResponseError(f"Baidu error {code}: {body.get('message')}")
    if "references" not in body:
        raise ProviderResponseError("Baidu response has no references")
    return [
        WebItem(
            title=text(v.get("title")),
            url=text(v.get("url")),
            content=text(v.get("content")),
            site_name=text(v.get("website")),
            published_date=text(v.get("date")),
            score=_score(v.get("authority_score")),
        )
        for v in _list(body.get("references"), "Baidu references")
        if v.get("type", "web") == "web"
    ]


PARSERS: dict[str, Callable[[Any], list[WebItem]]] = {
    "bocha": bocha_items,
    "tavily": tavily_items,
    "baidu": baidu_items,
}
