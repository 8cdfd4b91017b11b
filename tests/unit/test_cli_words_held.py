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
