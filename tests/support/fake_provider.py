"""A local HTTP server answering as Bocha, Tavily and Baidu AI search do, on loopback.

Each provider's endpoint answers in that provider's real response format. ``behaviour`` picks
what the next requests get: ``ok``, ``empty``, ``slow`` (answers after ``delay_s``),
``429``, ``500``, ``garbage`` (not JSON) or ``error-body`` (HTTP 200 with the provider's
error object). Requests are recorded for assertions.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

BOCHA_OK: dict[str, Any] = {
    "code": 200,
    "log_id": "a1b2c3",
    "msg": None,
    "data": {
        "_type": "SearchResponse",
        "queryContext": {"originalQuery": "物业巡检"},
        "webPages": {
            "webSearchUrl": "https://bochaai.com/search?q=物业巡检",
            "totalEstimatedMatches": 1200,
            "value": [
                {
                    "id": "https://api.bochaai.com/v1/#WebPages.0",
                    "name": "物业巡检流程标准 - 知乎",
                    "url": "https://www.zhihu.com/question/123/answer/456",
                    "displayUrl": "https://www.zhihu.com/question/123/answer/456",
                    "snippet": "物业巡检一般分为日常巡检、专项巡检…",
                    "summary": "物业巡检一般分为日常巡检、专项巡检、应急巡检三类。",
                    "siteName": "知乎",
                    "siteIcon": "https://th.bochaai.com/favicon?domain_url=zhihu.com",
                    "datePublished": "2025-08-12T10:00:00+08:00",
                    "dateLastCrawled": "2025-08-12T10:00:00Z",
                    "cachedPageUrl": None,
                    "language": None,
                    "isFamilyFriendly": None,
                    "isNavigational": None,
                },
                {
                    "id": "https://api.bochaai.com/v1/#WebPages.1",
                    "name": "巡检制度范本",
                    "url": "https://example.com/patrol",
                    "displayUrl": "https://example.com/patrol",
                    "snippet": "巡检制度范本：巡检人员应……",
                    "summary": "",
                    "siteName": "",
                    "dateLastCrawled": "2024-12-01T00:00:00Z",
                },
                {
                    "id": "https://api.bochaai.com/v1/#WebPages.2",
                    "name": "空白页",
                    "url": "https://empty.example.org/",
                    "snippet": "   ",
                    "summary": "",
                },
            ],
            "someResultsRemoved": True,
        },
        "images": None,
        "videos": None,
    },
}
BOCHA_ERROR = {"code": 403, "log_id": "x", "msg": "余额不足", "data": None}

TAVILY_OK: dict[str, Any] = {
    "query": "物业巡检",
    "follow_up_questions": None,
    "answer": None,
    "images": [],
    "results": [
        {
            "title": "Property inspection checklist",
            "url": "https://www.example.com/inspection",
            "content": "A property inspection covers daily, special and emergency rounds.",
            "score": 0.91,
            "raw_content": None,
            "published_date": "2025-03-04",
        },
        {
            "title": "巡检要点",
            "url": "https://blog.example.cn/p/1",
            "content": "巡检要点包括设备运行状态。",
            "score": 0.42,
            "raw_content": None,
        },
    ],
    "response_time": 0.61,
}
TAVILY_ERROR = {"detail": {"error": "Unauthorized: missing or invalid API key."}}

BAIDU_OK: dict[str, Any] = {
    "request_id": "4a7f-req",
    "references": [
        {
            "id": 1,
            "url": "https://baike.baidu.com/item/物业巡检",
            "title": "物业巡检_百度百科",
            "date": "2025-4-24",
            "content": "物业巡检是指物业服务企业对辖区内的设施设备进行的检查。",
            "icon": None,
            "web_anchor": "物业巡检_百度百科",
            "type": "web",
            "website": "百度百科",
            "image": None,
            "video": None,
            "authority_score": 0.87,
        },
        {
            "id": 2,
            "url": "https://www.example.gov.cn/notice",
            "title": "关于加强物业巡检的通知",
            "date": "2025-04-27 18:02:00",
            "content": "各物业服务企业应建立巡检台账。",
            "type": "web",
            "website": "",
            "authority_score": 0.5,
        },
        {
            "id": 3,
            "url": "https://img.example.com/x.png",
            "title": "图",
            "type": "image",
            "content": "",
            "website": "",
        },
    ],
}
BAIDU_ERROR = {"code": 216003, "message": "Authentication error", "request_id": "4a7f-err"}

OK = {"bocha": BOCHA_OK, "tavily": TAVILY_OK, "baidu": BAIDU_OK}
EMPTY = {
    "bocha": {"code": 200, "msg": None, "data": {"webPages": {"value": []}}},
    "tavily": {"query": "x", "results": [], "response_time": 0.1},
    "baidu": {"request_id": "r", "references": []},
}
ERROR_BODY = {"bocha": BOCHA_ERROR, "tavily": TAVILY_ERROR, "baidu": BAIDU_ERROR}
PATHS = {"bocha": "/v1/web-search", "tavily": "/search", "baidu": "/v2/ai_search/web_search"}


@dataclass
class FakeProvider:
    """State shared between the test and the server."""

    behaviour: str = "ok"
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def reset(self, behaviour: str = "ok", delay_s: float = 0.0) -> None:
        self.behaviour, self.delay_s = behaviour, delay_s
        self.requests.clear()

    def app(self) -> Starlette:
        async def handle(provider: str, request: Request) -> Response:
            self.requests.append(
                {
                    "provider": provider,
                    "headers": dict(request.headers),
                    "json": await request.json(),
                }
            )
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            behaviour = self.behaviour
            if behaviour == "slow":
                await asyncio.sleep(SLOW_S)
            if behaviour == "429":
                return JSONResponse({"error": "rate limited"}, status_code=429)
            if behaviour == "500":
                return PlainTextResponse("upstream exploded", status_code=500)
            if behaviour == "garbage":
                return PlainTextResponse("<html>not json</html>", status_code=200)
            if behaviour == "error-body":
                return JSONResponse(ERROR_BODY[provider])
            if behaviour == "empty":
                return JSONResponse(EMPTY[provider])
            return JSONResponse(OK[provider])

        def endpoint(provider: str) -> Any:
            async def answer(request: Request) -> Response:
                return await handle(provider, request)

            return answer

        return Starlette(
            routes=[Route(path, endpoint(name), methods=["POST"]) for name, path in PATHS.items()]
        )


# How long a ``slow`` provider takes to answer: far beyond any timeout a test sets, so "it did
# not wait for the provider" can be asserted with a bound of half this, whatever the load.
SLOW_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerThread:
    """uvicorn serving an ASGI app on loopback in a background thread."""

    def __init__(self, app: Any, lifespan: str = "off") -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan=lifespan
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60  # generous: a busy machine starts threads slowly
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake provider did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.server.force_exit = True  # a ``slow`` answer still sleeping is not waited for
        self.thread.join(timeout=10)
