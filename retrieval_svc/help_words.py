"""``--help`` in the reader's language: every command's and option's help of both command
lines (``retrieval-svc``, ``retrieval-indexer``) with its Chinese, and the words Typer prints
around them (the panels' titles, "Usage:", defaults), said in Chinese under a Chinese locale.

The rows are keyed by the English help itself, so a help text changed in English loses its
Chinese row and tests/unit/test_cli_words_held.py names it. ``install()`` is called by both
command lines (through ``usage_words.install``); English help is printed as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from retrieval_svc.help_rows import HELP as SERVICE
from retrieval_svc.help_rows_indexer import HELP as INDEXER
from retrieval_svc.words import cli_language

HELP = SERVICE | INDEXER

# Typer's own words around the help (rich_utils' constants), with their Chinese.
FRAME = {
    "ARGUMENTS_PANEL_TITLE": "参数",
    "OPTIONS_PANEL_TITLE": "选项",
    "COMMANDS_PANEL_TITLE": "命令",
    "DEFAULT_STRING": "[默认：{}]",
    "ENVVAR_STRING": "[环境变量：{}]",
    "REQUIRED_LONG_STRING": "[必填]",
    "DEPRECATED_STRING": "（已弃用）",
}
USAGE = "用法："


def chinese(text: str | None) -> str | None:
    """``text`` (an English help) in Chinese, or as it is when it has no row."""
    if not text:
        return text
    return HELP.get(inspect.cleandoc(text), text)


@contextmanager
def _said_in_chinese(obj: Any, ctx: Any, rich_utils: Any) -> Iterator[None]:
    """While one help is printed: Typer's frame, ``obj``'s help, its parameters' and its
    commands' in Chinese; each put back after (an in-process caller may ask again in English)."""
    saved: list[tuple[Any, str, Any]] = []

    def put(target: Any, name: str, value: Any) -> None:
        saved.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    try:
        for name, words in FRAME.items():
            if hasattr(rich_utils, name):
                put(rich_utils, name, words)
        english_text = rich_utils._make_rich_text

        def folded(**kwargs: Any) -> Any:
            text = english_text(**kwargs)  # (Chinese has no spaces to wrap at: fold, not cut)
            if hasattr(text, "overflow"):
                text.overflow = "fold"
            return text

        put(rich_utils, "_make_rich_text", folded)
        put(obj, "help", chinese(obj.help))
        for param in obj.get_params(ctx):
            if getattr(param, "help", None):
                put(param, "help", chinese(param.help))
        for command in getattr(obj, "commands", {}).values():
            put(command, "help", chinese(command.help))
            if command.short_help:
                put(command, "short_help", chinese(command.short_help))
        english_usage = obj.get_usage

        def usage(ctx: Any) -> str:
            text = str(english_usage(ctx))
            return USAGE + text.split(":", 1)[1] if text.startswith("Usage:") else text

        saved.append((obj, "get_usage", None))
        obj.get_usage = usage
        yield
    finally:
        for target, name, value in reversed(saved):
            if name == "get_usage":
                del target.get_usage
            else:
                setattr(target, name, value)


def install() -> None:
    """Make Typer's help printing speak the command line's language (decided when the help
    is printed, so the locale the command runs under counts)."""
    from typer import rich_utils

    if getattr(rich_utils.rich_format_help, "_rsvc", False):
        return
    english = rich_utils.rich_format_help

    def format_help(*, obj: Any, ctx: Any, markup_mode: Any) -> None:
        if cli_language() != "zh":
            english(obj=obj, ctx=ctx, markup_mode=markup_mode)
            return
        with _said_in_chinese(obj, ctx, rich_utils):
            english(obj=obj, ctx=ctx, markup_mode=markup_mode)

    format_help._rsvc = True  # type: ignore[attr-defined]
    rich_utils.rich_format_help = format_help  # (Typer's core calls it through the module)
