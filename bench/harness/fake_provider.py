"""A web search provider on loopback answering in Tavily's format after a fixed delay.

python -m bench.harness.fake_provider --port 18099 --delay-ms 80
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

RESULTS = [
    {
        "title": f"物业巡检参考 {i}",
        "url": f"https://www.example{i}.com/a/{i}",
        "content": f"物业巡检一般分为日常巡检、专项巡检和应急巡检（参考 {i}）。",
        "score": round(0.9 - i * 0.1, 2),
        "published_date": "2025-08-12",
    }
    for i in range(10)
]


def app(delay_s: float) -> Starlette:
    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(delay_s)
        count = int(body.get("max_results", 5))
        return JSONResponse(
            {"query": body.get("query", ""), "results": RESULTS[:count], "response_time": delay_s}
        )

    return Starlette(routes=[Route("/search", search, methods=["POST"])])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=80)
    args = parser.parse_args()
    uvicorn.run(app(args.delay_ms / 1000), host="127.0.0.1", port=args.port, log_level="warning")
