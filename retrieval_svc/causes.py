"""Why a connection to a server (Elasticsearch, a directory, a model server) failed, as a
person reads it: refused, no such host, no answer in time, reset, unreachable, TLS — in place
of the client library's own English ("Cannot connect to host … ssl:default [Connect call
failed …]"), which names nothing the line around it does not already say.

A cause of no known kind is None: the caller then quotes the library's text as a detail.
Imports nothing of the project (the word table takes its rows from here).
"""

from __future__ import annotations

import errno
import re
import socket
import ssl

# kind → (English, Chinese); the English is what the directory's errors carry, said again
# in Chinese by the word table's problem rows.
CAUSES: dict[str, tuple[str, str]] = {
    "cause_refused": ("connection refused, nothing listens there", "连接被拒绝，那里没有服务在监听"),
    "cause_no_host": ("the host name does not resolve", "主机名无法解析"),
    "cause_timeout": ("no answer in time", "超时未应答"),
    "cause_reset": ("the connection was reset", "连接被对方重置"),
    "cause_unreachable": ("the network cannot reach the host", "网络无法到达该主机"),
    "cause_db_file": ("the database file cannot be opened (its folder is missing, or no permission)", "无法打开数据库文件（所在文件夹不存在，或没有权限）"),
    "cause_tls": ("TLS failed ({detail})", "TLS 握手失败（{detail}）"),
}  # fmt: skip

_ERRNO = {
    errno.ECONNREFUSED: "cause_refused",
    errno.ETIMEDOUT: "cause_timeout",
    errno.ECONNRESET: "cause_reset",
    errno.EHOSTUNREACH: "cause_unreachable",
    errno.ENETUNREACH: "cause_unreachable",
}
# (getaddrinfo's codes: no such name, no answer from the resolver, no address)
_NO_HOST = {socket.EAI_NONAME, socket.EAI_AGAIN, getattr(socket, "EAI_NODATA", -5)}
_ERRNO_IN_TEXT = re.compile(r"\[Errno (-?\d+)\]")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: causes, contexts, a transport's ``errors``, aiohttp's
    ``os_error``."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 20:
        one = todo.pop(0)
        if any(one is s for s in seen):
            continue
        seen.append(one)
        more = [one.__cause__, one.__context__, getattr(one, "os_error", None)]
        more.extend(e for e in getattr(one, "errors", ()) or () if isinstance(e, BaseException))
        todo.extend(e for e in more if isinstance(e, BaseException))
    return seen


def _kind(one: BaseException) -> tuple[str, dict[str, str]] | None:
    if isinstance(one, ssl.SSLError | ssl.CertificateError) or "Tls" in type(one).__name__:
        detail = getattr(one, "verify_message", None) or getattr(one, "reason", None) or one
        return "cause_tls", {"detail": str(detail)[:200]}
    if isinstance(one, socket.gaierror):
        return ("cause_no_host", {}) if one.errno in _NO_HOST else None
    if isinstance(one, OSError) and one.errno in _ERRNO:
        return _ERRNO[one.errno], {}
    if isinstance(one, TimeoutError) or "Timeout" in type(one).__name__:
        return "cause_timeout", {}
    if "unable to open database file" in str(one):  # (SQLite's)
        return "cause_db_file", {}
    if "invalid server address" in str(one):  # (ldap3: a name that does not resolve)
        return "cause_no_host", {}
    if found := _ERRNO_IN_TEXT.search(str(one)):  # (ldap3 says the errno only in its text)
        code = int(found[1])
        if code in _ERRNO:
            return _ERRNO[code], {}
        if code in _NO_HOST:
            return "cause_no_host", {}
    return None


def cause(exc: BaseException, lang: str = "en") -> str | None:
    """Why ``exc`` (a failed connection, however wrapped) failed, in ``lang``; None when of
    no known kind."""
    for one in _chain(exc):
        if (found := _kind(one)) is not None:
            key, values = found
            return CAUSES[key][1 if lang == "zh" else 0].format(**values)
    return None
