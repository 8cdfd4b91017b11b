"""The documentation gives Dify's variables as Dify writes them (``{{#sys.user_id#}}``).

Dify 1.13.2 resolves only that spelling: ``{{sys.user_id}}`` or ``{{token}}``, pasted from a
page into a workflow, is sent as written and refused. So a page may name such a spelling only
as the wrong one (its sentence says it is refused or sent as written); a command's data in a
fenced block (the guide sends one to show the refusal) is not a binding to paste.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [*ROOT.glob("README*.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
)
# A variable in braces that is not Dify's {{#…#}}: {{sys.user_id}}, {{ token }}, {{conversation.x}}
# (a Jinja expression with an index or a filter, as a template node takes, is not one).
NOT_DIFYS = re.compile(r"\{\{(?!#)\s*[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*\}\}")
SAYS_WRONG = ("refused", "sent as written", "fails loudly", "拒绝", "按原文", "明确失败")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# Sentences (a table row is one): a spelling is excused only by its own sentence.
SENTENCE = re.compile(r"(?<=[.;])\s+|[。；]|\n\s*\n|\n(?=\|)")


def wrong_spellings(text: str) -> list[str]:
    """The sentences of ``text`` (outside fenced blocks) that give a variable in a spelling
    Dify does not resolve without saying it is the wrong one."""
    prose = FENCE.sub("", text)
    return [
        sentence.strip()[:160]
        for sentence in SENTENCE.split(prose)
        if NOT_DIFYS.search(sentence)
        and not any(w in " ".join(sentence.split()) for w in SAYS_WRONG)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_page_gives_dify_variables_as_dify_writes_them(page: Path) -> None:
    assert wrong_spellings(page.read_text("utf-8")) == []


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("set `user_id` to `{{sys.user_id}}` in the node", True),
        ("condition `principal_token` *is* `{{token}}`", True),
        ("`user_id` *is* `{{ sys.user_id }}`", True),
        ("`user_id` *is* `{{#sys.user_id#}}`", False),
        ("the text `{{sys.user_id}}` is sent as written and refused", False),
        ("`{{sys.user_id}}` fills it. A refusal (403) is silent", True),
        ("| tool | `{{sys.user_id}}` | fails |\n| node | `x` | refused (400) |", True),
        ("template `{{ result[0].formatted_chunks }}`", False),
        ("```bash\nfor id in '{{sys.user_id}}'; do :; done\n```", False),
    ],
)
def test_the_check_can_fail(text: str, flagged: bool) -> None:
    assert bool(wrong_spellings(text)) is flagged
