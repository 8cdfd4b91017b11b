"""Every page a user follows has a Chinese twin that says the same: the two link each other at
the top, the twin has the same headings and code blocks (the same commands in them, comments
aside), names the same settings, carries each section's files, options and measured figures
into the same section, and a Chinese page sends its reader to the Chinese twins. A cheap
structural check, so a twin that falls behind its page fails here rather than in a Chinese
administrator's terminal."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The pages a user follows, each with its twin <page>.zh-CN.md. The twins of STRICT pages are
# whole translations (same headings, same code); the others are Chinese pages of their own
# shape (they still link, and are linked, as twins).
STRICT = [
    "README.md",
    "docs/getting-started.md",
    "docs/guide.md",
    "docs/api.md",
    "docs/filters.md",
    "docs/search.md",
    "docs/indexer.md",
    "docs/operations.md",
    "docs/configuration.md",
    "docs/performance.md",
    "docs/permissions.md",
]
FOLLOWED = [*STRICT, "docs/dify.md", "examples/dify/README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
# Blocks that show output or a picture in the reader's language, rather than commands.
SHOWN = {"text", "mermaid"}


def twin(page: str) -> Path:
    return ROOT / page.replace(".md", ".zh-CN.md")


def headings(text: str) -> list[str]:
    return re.findall(r"^(#{1,6}) ", FENCE.sub("", text), re.M)


def commands(text: str) -> list[tuple[str, str]]:
    """(language, the block without its comments) for each code block of commands or code."""
    out = []
    for lang, body in FENCE.findall(text):
        if lang in SHOWN:
            continue
        lines = [re.sub(r"(^|\s)#(\s.*)?$", "", line).rstrip() for line in body.splitlines()]
        out.append((lang, "\n".join(line for line in lines if line)))
    return out


def test_every_page_a_user_follows_has_a_chinese_twin() -> None:
    missing = [page for page in FOLLOWED if not twin(page).is_file()]
    assert not missing, f"no Chinese twin: {missing}"


@pytest.mark.parametrize("page", FOLLOWED)
def test_the_page_and_its_twin_link_each_other_at_the_top(page: str) -> None:
    english, chinese = ROOT / page, twin(page)
    top = "\n".join(english.read_text("utf-8").splitlines()[:6])
    assert f"]({chinese.name})" in top, f"{page} does not link {chinese.name} at its top"
    top = "\n".join(chinese.read_text("utf-8").splitlines()[:6])
    assert f"]({english.name})" in top, f"{chinese.name} does not link {english.name} at its top"


@pytest.mark.parametrize("page", STRICT)
def test_the_twin_has_the_same_headings_and_code(page: str) -> None:
    english, chinese = (ROOT / page).read_text("utf-8"), twin(page).read_text("utf-8")
    assert headings(chinese) == headings(english), "headings differ (count or level)"
    assert len(FENCE.findall(chinese)) == len(FENCE.findall(english)), "code blocks differ"
    if page != "docs/guide.md":  # (its checks look for Chinese words: test_guide_es holds it)
        assert commands(chinese) == commands(english)


@pytest.mark.parametrize("page", STRICT)
def test_the_twin_names_the_same_settings(page: str) -> None:
    def named(path: Path) -> set[str]:
        return set(re.findall(r"\bRSVC_[A-Z0-9_]*[A-Z0-9]", path.read_text("utf-8")))

    assert named(twin(page)) == named(ROOT / page)


def chinese_pages() -> list[Path]:
    return sorted({twin(page) for page in FOLLOWED if twin(page).is_file()})


@pytest.mark.parametrize("page", chinese_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_chinese_page_links_the_chinese_twins(page: Path) -> None:
    """Past its top lines, a Chinese page sends its reader to a page's Chinese twin, not to the
    English page, wherever a twin exists (but where a link says it is the English one)."""
    body = "\n".join(page.read_text("utf-8").splitlines()[6:])
    english = [
        target
        for label, target in re.findall(r"\[([^\]]*)\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", body)
        if not target.endswith(".zh-CN.md")
        and label not in ("English", "英文版")
        and (page.parent / target.replace(".md", ".zh-CN.md")).resolve().is_file()
    ]
    assert not english, f"links English pages that have a Chinese twin: {sorted(set(english))}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lstrip("#").strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@pytest.mark.parametrize("page", chinese_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_chinese_page_links_anchors_that_exist(page: Path) -> None:
    broken = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*\.md|)#([^)\s]+)\)", page.read_text("utf-8")):
        path = (page.parent / target).resolve() if target else page
        if path.suffix == ".md" and path.is_file():
            text = FENCE.sub("", path.read_text("utf-8"))
            if anchor not in {slug(h) for h in re.findall(r"^#{1,6} .*", text, re.M)}:
                broken.append(f"{target}#{anchor}")
    assert not broken, f"anchors that do not exist: {broken}"


@pytest.mark.parametrize("page", chinese_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_chinese_page_comments_its_commands_in_chinese(page: Path) -> None:
    """A comment in a Chinese page's code is Chinese (the twins' code is held equal comments
    aside); the guide's blocks are the English guide's own, run by test_guide_es."""
    if page.name == "guide.zh-CN.md":
        return
    english = []
    for lang, body in FENCE.findall(page.read_text("utf-8")):
        for line in body.splitlines() if lang not in SHOWN else []:
            comment = re.search(r"(^|\s)#\s(.*)$", line)
            if (
                comment
                and re.search(r"[A-Za-z]{3,} [A-Za-z]{2,}", comment.group(2))
                and not re.search(r"[\u4e00-\u9fff]", comment.group(2))
            ):
                english.append(comment.group(2))
    assert english == []


# The facts a condensed paragraph drops first: the names a reader types or looks for (settings,
# metrics, files of the repository, benchmark commands, options) and the figures measured.
NAME = re.compile(
    r"\b(?:RSVC_[A-Z0-9_]*[A-Z0-9]|rsvc_[a-z0-9_]*[a-z0-9])\b"
    r"|(?<![\w/.-])(?:tests|bench|retrieval_svc|indexer|scripts|helm|examples)/[\w./-]*\w"
    r"|python -m [\w.]+"
    r"|(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]"
)
# A figure: 1,137 or 0.51 or 31 million / 3,100 万 (the same number written the Chinese way).
FIGURE = re.compile(
    r"(?<![A-Za-z0-9_.,/-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
    r"(?:\s*(million|万|亿)|(?![A-Za-z0-9_]))"
)
SCALE = {"million": 10**6, "万": 10**4, "亿": 10**8}


def sections(text: str) -> list[str]:
    """The page's prose between its headings, in order (code blocks left out)."""
    return re.split(r"^#{1,6} .*$", FENCE.sub("", text), flags=re.M)


def names(text: str) -> set[str]:
    return {name.replace(".zh-CN.md", ".md") for name in NAME.findall(text)}


def figures(text: str) -> set[Decimal]:
    """The numbers of the prose, as values; small whole numbers aside (often written 两, 三)."""
    text = re.sub(r"`[^`]*`|\]\([^)]*\)|https?://\S+", "", text)
    values = {Decimal(n.replace(",", "")) * SCALE.get(unit, 1) for n, unit in FIGURE.findall(text)}
    return {v.normalize() for v in values if v >= 10 or v != v.to_integral_value()}


def section_gaps(page: str, facts: Callable[[str], set[Any]]) -> list[str]:
    english = sections((ROOT / page).read_text("utf-8"))
    chinese = sections(twin(page).read_text("utf-8"))
    titles = [
        "(top)",
        *re.findall(r"^#{1,6} (.*)$", FENCE.sub("", (ROOT / page).read_text("utf-8")), re.M),
    ]
    return [
        f"{title}: {sorted(map(str, missing))}"
        for title, en, zh in zip(titles, english, chinese, strict=True)
        if (missing := facts(en) - facts(zh))
    ]


@pytest.mark.parametrize("page", STRICT)
def test_each_section_of_the_twin_names_what_the_page_names(page: str) -> None:
    """Settings, metrics, files, benchmark commands and options of an English section are in
    the matching section of its twin: a paragraph condensed away fails here."""
    assert not section_gaps(page, names), section_gaps(page, names)


@pytest.mark.parametrize("page", STRICT)
def test_each_section_of_the_twin_carries_the_pages_figures(page: str) -> None:
    """Every measured figure of an English section is in the matching section of its twin."""
    assert not section_gaps(page, figures), section_gaps(page, figures)


@pytest.mark.parametrize("page", [page for page in FOLLOWED if page not in STRICT])
def test_a_twin_of_its_own_shape_names_and_carries_what_the_page_does(page: str) -> None:
    """A twin arranged its own way still names every setting, file, command and option of
    its page, and carries every measured figure, somewhere on the page."""
    english = FENCE.sub("", (ROOT / page).read_text("utf-8"))
    chinese = FENCE.sub("", twin(page).read_text("utf-8"))
    assert not names(english) - names(chinese)
    assert not figures(english) - figures(chinese)
