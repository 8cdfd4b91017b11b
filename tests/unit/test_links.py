"""Every relative link of the documentation leads somewhere (issue #50): the file or folder it
names exists, and an anchor (``#section``) names a heading of the page it points into, as
GitHub makes them. README, its Chinese twin, docs/, bench/, examples/ and mappings/."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {
        *ROOT.glob("README*.md"),
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "bench" / "README.md",
        *(ROOT / "bench" / "results").rglob("NOTE.md"),
        *(ROOT / "examples").rglob("*.md"),
        *(ROOT / "mappings").glob("*.md"),
        *(ROOT / "helm").rglob("README.md"),
    }
)
# [text](target) and [text](target "title"); not images of remote pages, not code spans.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than
    ``-`` and ``_`` removed (letters and digits of every script kept), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    kept = "".join(
        ch
        for ch in text
        if ch in " -_" or unicodedata.category(ch)[0] in "LNM"  # letters, numbers, marks
    )
    return kept.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors a page has: one per heading (repeats numbered -1, -2 …), and explicit
    ``<a id=…>`` / ``<a name=…>``."""
    text = FENCE.sub("", page.read_text("utf-8"))
    seen: dict[str, int] = {}
    found = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    for _, heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return frozenset(found)


def links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text("utf-8")))
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, mailto:, …
    ]


def test_the_checker_reads_github_anchors() -> None:
    assert slug("Semantic and hybrid retrieval") == "semantic-and-hybrid-retrieval"
    assert slug("`--shard I/N`: across machines") == "--shard-in-across-machines"
    assert slug("3. 权限从哪里来（文件夹规则）") == "3-权限从哪里来文件夹规则"
    assert slug("Hybrid, the default mode, at 10k, 100k and 1M chunks") == (
        "hybrid-the-default-mode-at-10k-100k-and-1m-chunks"
    )


def test_the_pages_link_to_each_other() -> None:
    assert len(PAGES) >= 10 and sum(len(links(p)) for p in PAGES) >= 50


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = unquote(target).partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(
                f"{target}: no {where.relative_to(ROOT) if ROOT in where.parents else where}"
            )
            continue
        if anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: {where.name} has no heading #{anchor}")
    assert not broken, "\n".join(broken)
