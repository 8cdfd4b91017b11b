"""Checks of configuration values, and configuration errors as a command says them.

The ground floor, with settings: imports nothing of the project.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError


def http_url(value: str, *, port: bool = False) -> str:
    """``value`` if it is an http(s) URL with a host (and a port, if asked); else ValueError
    saying what a good one looks like (the value shown without credentials)."""
    try:
        parts = urlsplit(value.strip())
        has_port = parts.port is not None
    except ValueError:
        parts, has_port = None, False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = value.rsplit("@", 1)[-1][:80]
        raise ValueError(f"{shown!r} is not an http(s) URL (like http://127.0.0.1:9200)")
    if port and not has_port:
        raise ValueError(f"{parts.hostname!r} needs a port (like http://127.0.0.1:9200)")
    return value.strip()


def shown_url(url: str) -> str:
    """``url`` as a log or a message may show it: without a user or password."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def database_url(value: str) -> str:
    """``value`` if it has SQLAlchemy's form, ``dialect[+driver]://…``; else ValueError (the
    URL, which may hold a password, is never shown)."""
    scheme, sep, _ = value.partition("://")
    if not sep or not scheme.replace("+", "").isalnum():
        raise ValueError(
            "not a database URL: give SQLAlchemy's form, like sqlite:///policy.db or "
            "postgresql+psycopg://user:password@host:5432/db"
        )
    return value


def describe_errors(exc: ValidationError) -> str:
    """A settings error on one line, naming the environment variables: what a CLI prints."""
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        name = f"RSVC_{loc[0].upper()}" + "".join(f"[{p}]" for p in loc[1:]) if loc else "settings"
        parts.append(f"{name}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)
