"""One language per console page (issue #36 §6): every word a page shows comes from
``WORDS`` in the browser's language; no template carries a literal English word, and both
languages have every word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retrieval_svc.console.text import WORDS

TEMPLATES = sorted((Path(__file__).parents[2] / "retrieval_svc/console/templates").glob("*.html"))


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_a_template_shows_no_literal_word(template: Path) -> None:
    source = template.read_text(encoding="utf-8")
    text = re.sub(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}", " ", source, flags=re.S)
    text = re.sub(r"<[^>]*>", " ", text)  # what is left is shown as written
    assert not re.findall(r"[A-Za-z]{2,}", text), template.name
    shown = re.findall(r'(?:placeholder|title|aria-label)="([^"{]*)"', source)
    assert not [a for a in shown if re.search(r"[A-Za-z]{2,}", a)], template.name


def test_every_word_is_in_both_languages() -> None:
    assert set(WORDS["en"]) == set(WORDS["zh"])
    for words in WORDS.values():
        used = set()
        for template in TEMPLATES:
            used |= set(re.findall(r"\bt\.([a-z_]+)", template.read_text(encoding="utf-8")))
            used |= set(re.findall(r't\["([a-z_]+)"\]', template.read_text(encoding="utf-8")))
        assert used <= set(words), used - set(words)


ROOT = Path(__file__).parents[2]
PAGES = ("search_as", "why_not", "policy", "knowledge_bases", "documents", "audit")
TWINS = sorted(
    page
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    if not page.name.endswith(".zh-CN.md") and page.with_suffix(".zh-CN.md").is_file()
)


@pytest.mark.parametrize("page", TWINS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_chinese_docs_name_the_console_pages_as_the_console_does(page: Path) -> None:
    """Where a page names a console page (*Search as*), its Chinese twin names it by the
    console's own Chinese word, so a reader finds the page the docs send them to."""
    english = page.read_text(encoding="utf-8")
    chinese = page.with_suffix(".zh-CN.md").read_text(encoding="utf-8")
    missing = [
        WORDS["zh"][key]
        for key in PAGES
        if f"*{WORDS['en'][key]}*" in english and WORDS["zh"][key] not in chinese
    ]
    assert not missing, f"{page.name}'s twin does not name {missing}"
