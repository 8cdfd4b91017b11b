"""No command line prints an English sentence of its own: every line the CLIs echo is a row of
the word table (``say``), so a new English-only line fails here before a Chinese
administrator's terminal shows it."""

from __future__ import annotations

import ast
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGLISH = re.compile(r"[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}")
PRINTS = {("typer", "echo"), ("err", "print"), ("console", "print")}


def _text(node: ast.expr) -> str | None:
    """A literal or f-string's words (its values left out)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def english_lines() -> list[str]:
    found = []
    for path in sorted([*(ROOT / "retrieval_svc/cli").glob("*.py"),
                        *(ROOT / "indexer/cli").glob("*.py")]):  # fmt: skip
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if (owner, getattr(func, "attr", "")) not in PRINTS:
                continue
            text = _text(node.args[0])
            if text and ENGLISH.search(re.sub(r"\{\}|`[^`]*`", "", text)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    return found


def test_no_command_line_echoes_an_english_sentence_of_its_own() -> None:
    # (parsed on a thread of its own: CPython 3.11's parser can fail with "AST constructor
    # recursion depth mismatch" on a thread whose recursion count an earlier test left off)
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(english_lines).result() == []


def progress_words() -> list[str]:
    """A progress bar's description or unit written as a literal (it shows in a terminal only,
    where no captured-output test looks)."""
    found = []
    for path in sorted((ROOT / "indexer/cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_task"):
                continue
            said = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "unit")]
            for arg in said:
                text = _text(arg)
                if text and re.search(r"[A-Za-z]{3,}", text.replace("{}", "")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    return found


def test_the_progress_bars_speak_through_the_word_table() -> None:
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(progress_words).result() == []


def test_the_scripts_a_guide_runs_have_no_english_only_line() -> None:
    """``scripts/es.sh`` and ``scripts/libreoffice.sh`` (the guides' first step) say every
    line through ``log2``/``die2``/``say2``: English under an English locale, Chinese under a
    Chinese one."""
    one_language = re.compile(r"(^|[;{&|]\s*)(log|die|echo) \"[^\"]*[A-Za-z]{3,} [A-Za-z]{2,}")
    found = [
        f"{name}:{n}: {line.strip()[:70]}"
        for name in ("es.sh", "libreoffice.sh")
        for n, line in enumerate((ROOT / "scripts" / name).read_text("utf-8").splitlines(), 1)
        if one_language.search(line.strip())
    ]
    assert found == []
