"""A configuration error as a command says it, in the reader's language: each setting's
problem from pydantic's error type (``validation_words``) or, for the project's own checks,
the rows of ``words.PROBLEMS`` that say their English again in Chinese.

The checks themselves (settings, the API key entry, URLs) stay on the ground floor and speak
English; only what is printed is said again here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from retrieval_svc.config_checks import describe_errors
from retrieval_svc.validation_words import said
from retrieval_svc.words import cli_language, problem, say


def detail(error: Mapping[str, Any], lang: str) -> str:
    """One pydantic error's problem in ``lang``: a check's own ``ValueError`` said again by
    the problem rows, any other error from its type."""
    ctx = error.get("ctx") or {}
    if error.get("type") == "value_error" and "error" in ctx:
        return problem(str(ctx["error"]), lang)
    return said(error, lang)


def named(name: str, problem: str, lang: str | None = None) -> str:
    """``RSVC_X: problem``, with the colon of the reader's language."""
    return f"{name}{'：' if (lang or cli_language()) == 'zh' else ': '}{problem}"


def settings_error(exc: ValidationError | SettingsError, lang: str | None = None) -> str:
    """``configuration error: RSVC_X: …`` in the reader's language (English as
    ``describe_errors`` says it); a value the environment holds that is not JSON where JSON
    is read (pydantic-settings' SettingsError) named by its variable."""
    lang = lang or cli_language()
    if isinstance(exc, SettingsError):
        found = re.search(r'field "(\w+)"', str(exc))
        name = f"RSVC_{found.group(1).upper()}" if found else "settings"
        cause = exc.__cause__
        problem = getattr(cause, "msg", None) or type(cause).__name__
        what = say("setting_not_json", lang, name=name, problem=problem)
        return say("configuration_error", lang, what=what)
    if lang != "zh":
        return say("configuration_error", lang, what=describe_errors(exc))
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        name = f"RSVC_{loc[0].upper()}" + "".join(f"[{p}]" for p in loc[1:]) if loc else "settings"
        parts.append(named(name, detail(error, lang), lang))
    return say("configuration_error", lang, what="；".join(parts))


def first_problem(exc: ValidationError, lang: str | None = None) -> str:
    """The first error's problem alone, in the reader's language (``new-key``'s entry)."""
    lang = lang or cli_language()
    return detail(exc.errors()[0], lang) if exc.errors() else str(exc)
