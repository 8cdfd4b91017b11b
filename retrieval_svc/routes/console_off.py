"""``/console`` while the console is off (``RSVC_CONSOLE=false``, the default): a page that
says so and how to turn it on, in English and Chinese — not a bare 404 an administrator
following a guide cannot read. Still a 404: nothing is served there."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>retrieval-svc: the console is off</title></head>
<body>
<h1>The console is off</h1>
<p>This service runs without its operator's console. To turn it on, set
<code>RSVC_CONSOLE=true</code> in the service's environment (the Helm chart:
<code>console.enabled: true</code>) and restart it; sign in with an admin key
(<code>retrieval-svc new-key --admin</code>). See docs/configuration.md
(<code>RSVC_CONSOLE</code>).</p>
<h1 lang="zh-CN">控制台未开启</h1>
<p lang="zh-CN">本服务运行时没有开启运维控制台。要开启，请在服务的环境变量中设置
<code>RSVC_CONSOLE=true</code>（Helm chart：<code>console.enabled: true</code>）并重启服务；
用管理员密钥登录（<code>retrieval-svc new-key --admin</code>）。详见 docs/configuration.md 中的
<code>RSVC_CONSOLE</code>。</p>
</body></html>
"""


@router.get("/console")
@router.get("/console/{_rest:path}")
async def console_is_off() -> HTMLResponse:
    return HTMLResponse(PAGE, status_code=404)
