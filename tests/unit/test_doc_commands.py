"""Every command README.md and docs/ print works as printed, in a fresh shell after the two
set-up commands (issue #26 item 1): the programs are found once the virtualenv is activated
(as the README says to do), and each ``retrieval-svc`` / ``retrieval-indexer`` line names
commands and options that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from indexer.cli import app as indexer_app
from retrieval_svc.cli import app as svc_app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS = {"retrieval-svc": svc_app, "retrieval-indexer": indexer_app}
FENCE = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.M | re.S)


def command_lines() -> list[tuple[str, str]]:
    """(where, line) for every program line of the fenced shell blocks, continuations joined."""
    found = []
    for doc in DOCS:
        for block in FENCE.findall(doc.read_text("utf-8")):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.split("  #")[0].split(" # ")[0].strip()
                if any(p in line.split() for p in PROGRAMS):
                    found.append((f"{doc.relative_to(ROOT)}: {line[:60]}", line))
    return found


LINES = command_lines()


def test_the_docs_print_program_commands() -> None:
    assert len(LINES) >= 20, LINES


@pytest.mark.parametrize("line", [pytest.param(line, id=where) for where, line in LINES])
def test_each_printed_command_exists_with_its_options(line: str) -> None:
    words = shlex.split(line.replace(" > ", " ").replace("…", "x"))
    at = next(i for i, w in enumerate(words) if w in PROGRAMS)
    command = typer.main.get_command(PROGRAMS[words[at]])  # (typer's own click: duck-typed)
    known: set[str] = {"--help"}
    rest = words[at + 1 :]
    while True:
        known |= {o for p in command.params for o in getattr(p, "opts", [])}
        group = getattr(command, "commands", None)
        if group is not None and rest and rest[0] in group:
            command = group[rest.pop(0)]
            continue
        break
    assert not hasattr(command, "commands"), f"{line}: no such command"
    used = {w.split("=")[0] for w in rest if w.startswith("--")}
    assert used <= known, f"{line}: unknown options {sorted(used - known)}"


def test_the_programs_are_found_after_the_readme_set_up() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "source .venv/bin/activate" in readme  # what a new shell needs, said where it is
    venv = Path(sys.executable).parent / "activate"
    shell = f"source {shlex.quote(str(venv))} && retrieval-svc --help && retrieval-indexer --help"
    done = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr
