"""What a watcher loads before it can narrow: a restart's window includes the indexer's own
start, so what only reading a document needs is loaded where a document is read (the parser
workers), not by the command itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"{statement}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,  # (this checkout's modules, whatever the test's working folder)
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return set(out.split())


def test_the_indexer_command_does_not_load_the_word_segmenter() -> None:
    assert "rjieba" not in loaded_by("from indexer.cli import app")


def test_the_segmenter_loads_on_first_use_and_cuts_as_before() -> None:
    from retrieval_svc.search.segment import segment

    assert segment("权限检索服务，Hello World") == "权限 检索服务 hello world"
