"""A mistyped command line answered in the reader's language: the usage, the hint and the error
that Typer (and the Click inside it) print for an unknown command or option, a missing or bad
value, said in Chinese under a Chinese locale.

Click's and Typer's own words are English and partly not translatable (f-strings), so the
finished message is matched against the shapes below and said again; a message of no known
shape keeps its words inside the Chinese frame. ``install()`` is called by both command lines.
"""

from __future__ import annotations

import re
from typing import Any

from retrieval_svc.words import cli_language, problem

# Click's messages (its own, and the copy vendored in Typer), each with its Chinese.
MESSAGES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"No such command (?P<name>.+?)\.$"), "没有命令 {name}。"),
    (
        re.compile(r"No such option:? (?P<name>\S+?)\.? Did you mean (?P<maybe>.+)\?$"),
        "没有选项 {name}。是不是 {maybe}？",
    ),
    (
        re.compile(r"No such option:? (?P<name>\S+?)\.? \(Possible options: (?P<maybe>.+)\)$"),
        "没有选项 {name}（可选：{maybe}）。",
    ),
    (
        re.compile(r"No such option:? (?P<name>\S+?)\.? \(Did you mean one of: (?P<maybe>.+)\?\)$"),
        "没有选项 {name}（是不是其中之一：{maybe}？）。",
    ),
    (re.compile(r"No such option:? (?P<name>\S+?)\.?$"), "没有选项 {name}。"),
    (re.compile(r"Missing option (?P<name>.+?)\.$"), "缺少选项 {name}。"),
    (re.compile(r"Missing argument (?P<name>.+?)\.$"), "缺少参数 {name}。"),
    (re.compile(r"Missing parameter:? (?P<name>.+?)\.?$"), "缺少参数 {name}。"),
    (re.compile(r"Missing command\.$"), "缺少命令。"),
    (re.compile(r"Option (?P<name>.+?) requires an argument\.$"), "选项 {name} 需要一个值。"),
    (
        re.compile(r"Option (?P<name>.+?) requires (?P<n>\d+) arguments\.$"),
        "选项 {name} 需要 {n} 个值。",
    ),
    (
        re.compile(r"Option (?P<name>.+?) does not take a value\.$"),
        "选项 {name} 不接受值。",
    ),
    (re.compile(r"Got unexpected extra arguments? \((?P<args>.*)\)$"), "多余的参数（{args}）。"),
    (
        re.compile(r"Invalid value for (?P<name>.+?): (?P<value>.+?) is not a valid (?P<t>\w+)\.$"),
        "{name} 的值无效：{value} 不是有效的 {t}。",
    ),
    (
        re.compile(r"Invalid value for (?P<name>.+?): (?P<value>.+?) is not one of (?P<c>.+)\.$"),
        "{name} 的值无效：{value} 不是 {c} 之一。",
    ),
    (re.compile(r"Invalid value for (?P<name>.+?): (?P<why>.+)$", re.S), "{name} 的值无效：{why}"),
    (re.compile(r"Invalid value: (?P<why>.+)$", re.S), "值无效：{why}"),
]

USAGE = "用法："
HELP = "用 [blue]'{command_path} {help_option}'[/] 查看帮助。"
ERROR = "错误"
ABORTED = "已中止。"


def said_in_chinese(message: str) -> str:
    """``message`` (one of Click's) in Chinese, or as it is when of no known shape; why a
    value was refused (the project's own English, made where it is decided) said again by
    the problem rows."""
    for pattern, chinese in MESSAGES:
        if found := pattern.match(message.strip()):
            values = found.groupdict()
            if "why" in values:
                values["why"] = problem(values["why"], "zh")
            return chinese.format(**values)
    return message


def converted(error: Any, lang: str) -> None:
    """A value Typer's pydantic conversion refused (``--limit abc``): its message from the
    error's type in ``lang``, not pydantic's English (nor its "Value error, " prefix)."""
    from pydantic import ValidationError

    from retrieval_svc.config_words import detail

    cause = getattr(error, "__cause__", None)
    if isinstance(cause, ValidationError) and isinstance(getattr(error, "message", None), str):
        error.message = "; ".join(detail(e, lang) for e in cause.errors())


def install() -> None:
    """Make Typer's error printing speak the command line's language (decided at each error,
    so the locale the command runs under counts, not the one it was imported under)."""
    from typer import rich_utils

    from retrieval_svc import help_words

    help_words.install()  # (and --help in it)
    if getattr(rich_utils.rich_format_error, "_rsvc", False):
        return
    english_error = rich_utils.rich_format_error
    english_abort = rich_utils.rich_abort_error

    def format_error(self: Any) -> None:
        converted(self, cli_language())
        if cli_language() != "zh" or self.__class__.__name__ == "NoArgsIsHelpError":
            english_error(self)
            return
        from rich.markup import escape
        from rich.panel import Panel

        console = rich_utils._get_rich_console(stderr=True)
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            usage = ctx.get_usage()
            if usage.startswith("Usage:"):
                usage = USAGE + usage.split(":", 1)[1].lstrip()
            console.print(rich_utils.highlighter(usage), style=rich_utils.STYLE_USAGE_COMMAND)
            if ctx.command.get_help_option(ctx) is not None:
                console.print(
                    HELP.format(
                        command_path=escape(ctx.command_path),
                        help_option=ctx.help_option_names[0],
                    ),
                    style=rich_utils.STYLE_ERRORS_SUGGESTION,
                )
        console.print(
            Panel(
                rich_utils.highlighter(said_in_chinese(self.format_message())),
                border_style=rich_utils.STYLE_ERRORS_PANEL_BORDER,
                title=ERROR,
                title_align=rich_utils.ALIGN_ERRORS_PANEL,
            )
        )

    def abort_error() -> None:
        if cli_language() != "zh":
            english_abort()
            return
        console = rich_utils._get_rich_console(stderr=True)
        console.print(ABORTED, style=rich_utils.STYLE_ABORTED)

    format_error._rsvc = True  # type: ignore[attr-defined]
    rich_utils.rich_format_error = format_error
    rich_utils.rich_abort_error = abort_error
