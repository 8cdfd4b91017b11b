"""docs/guide.md and its Chinese twin run as printed: every ``bash`` block, in order, in one
shell, against the suite's Elasticsearch, its OpenLDAP server and a real ``retrieval-svc serve``
the guide starts itself; a ``text`` block introduced by "prints" ("输出") is what the block
before it must print (a line's ``…`` stands for anything). Each page runs in its reader's
locale — the English one under ``C.UTF-8``, the Chinese one under ``zh_CN.UTF-8`` — so its
checks and the output it shows are what that reader's terminal prints. The twin's commands are
the English ones but for the words they look for in the command lines' output."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.words import LINES
from tests.support import ES_URL
from tests.support.fake_provider import free_port

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
TWIN = ROOT / "docs" / "guide.zh-CN.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)

# What the Chinese guide looks for where the English one looks for an English line: the same
# line's Chinese (retrieval_svc/words.py), as a zh_CN.UTF-8 terminal prints it.
LOCALISED = {
    "'^(indexed|passed over)'": "'^(已索引|略过)'",
    "'^synced'": "'^已同步'",
    "'[0-9]+ pruned'": "'[0-9]+ 个已清除'",
    "grep -q re-listing": "grep -q 重新列举",
}


def steps(page: Path) -> list[tuple[str, str | None]]:
    """Each ``bash`` block with the output the page says it prints (or None)."""
    text = page.read_text("utf-8")
    out: list[tuple[str, str | None]] = []
    end = 0
    for match in FENCE.finditer(text):
        lang, body = match.group(1), match.group(2)
        between = text[end : match.start()].strip()
        end = match.end()
        if lang == "bash":
            out.append((body, None))
        elif lang == "text" and out and between.lower().startswith(("prints", "输出")):
            out[-1] = (out[-1][0], body)
    return out


def in_chinese(body: str) -> str:
    """An English block with its output checks as the Chinese guide writes them."""
    for english, chinese in LOCALISED.items():
        body = body.replace(english, chinese)
    return body


def expected(printed: str, wanted: str) -> list[str]:
    """Where ``printed`` differs from ``wanted``, line by line (``…``: anything); nothing
    more, nothing less — a passage the person must not see fails the guide."""
    lines, want = printed.strip().splitlines(), wanted.strip().splitlines()
    wrong = [
        f"{got!r} is not {line!r}"
        for got, line in zip(lines, want, strict=False)
        if not re.fullmatch(".*".join(re.escape(p) for p in line.split("…")), got)
    ]
    if len(lines) != len(want):
        wrong.append(f"{len(lines)} lines, not {len(want)}")
    return wrong


def test_the_guide_and_its_twin_have_the_same_commands() -> None:
    ours = [body for body, _ in steps(GUIDE)]
    assert len(ours) >= 10
    assert [body for body, _ in steps(TWIN)] == [in_chinese(body) for body in ours]
    assert all(english in "".join(ours) for english in LOCALISED)  # (no stale entry)


def test_the_twin_looks_for_the_words_the_command_lines_print() -> None:
    for key, word in [
        ("verb_indexed", "已索引"),
        ("passed_over", "略过"),
        ("synced", "已同步"),
        ("skipped", "个已清除"),
        ("what_relisting", "重新列举"),
    ]:
        assert word in LINES[key][1], (key, word)


def test_each_guide_shows_the_output_of_its_own_language() -> None:
    """The Chinese guide's outputs are the Chinese lines, the English guide's the English."""
    zh_out = "\n".join(wanted for _, wanted in steps(TWIN) if wanted)
    en_out = "\n".join(wanted for _, wanted in steps(GUIDE) if wanted)
    for english in ("indexed ", "passed over", "synced:", " pruned", "done:"):
        assert english not in zh_out, english
        assert english in en_out, english


def forget_the_company(ldap_server: str) -> None:
    """Remove what a guide's run added to the suite's directory (its people and departments),
    so that each guide starts from the directory it describes."""
    subprocess.run(
        ["ldapdelete", "-x", "-r", "-H", ldap_server, "-D", "cn=admin,dc=example,dc=org",
         "-w", "admin", "ou=company,dc=example,dc=org"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("page", "locale"), [(GUIDE, "C.UTF-8"), (TWIN, "zh_CN.UTF-8")], ids=["en", "zh-CN"]
)
def test_the_guide_runs_as_printed(
    page: Path, locale: str, ldap_server: str, tmp_path: Path, es_sync: Elasticsearch
) -> None:
    alias = f"rsvc-test-guide-{uuid.uuid4().hex[:8]}"
    forget_the_company(ldap_server)
    script = ["set -eo pipefail"]
    for n, (body, _) in enumerate(steps(page)):
        script += [f"echo '@@step {n}@@'", body]
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "LDAP_URL": ldap_server,
        "RSVC_PORT": str(free_port()),
        # (what the guide prints is under test, not the machine's speed: on a busy machine a
        # request, the first search of the new index above all, can outlast the 4 s default)
        "RSVC_REQUEST_DEADLINE_S": "60",
        "LANG": locale,  # (the reader's terminal: LANG alone, so no C library locale is needed)
    }
    for name in ("RSVC_API_KEYS_FILE", "RSVC_CASBIN_DB_URL", "RSVC_LANG", "LC_ALL", "LC_MESSAGES"):
        env.pop(name, None)
    shell = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        printed, _ = shell.communicate(timeout=900)
    finally:
        with_service = shell.pid
        try:
            os.killpg(with_service, signal.SIGTERM)  # (the service the guide left, if it failed)
        except ProcessLookupError:
            pass
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}*")
        es_sync.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")
        forget_the_company(ldap_server)
    outputs = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"@@step (\d+)@@\n(.*?)(?=@@step \d+@@\n|\Z)", printed, re.S)
    }
    assert shell.returncode == 0, printed[-4000:]
    for n, (body, wanted) in enumerate(steps(page)):
        if wanted is not None:
            missing = expected(outputs.get(n, ""), wanted)
            assert not missing, f"step {n}:\n{body}\nprinted:\n{outputs.get(n)}\n{missing}"


@pytest.mark.parametrize(
    ("printed", "wanted", "missing"),
    [
        ("indexed 7 documents (9 chunks) in 6 s\nx", "indexed 7 documents (…\nx", []),
        ("a\nb", "b\na", ["'a' is not 'b'", "'b' is not 'a'"]),  # in order
        ("员工手册\n费用报销制度", "员工手册", ["2 lines, not 1"]),  # nothing more
    ],
)
def test_expected_output_is_read_line_by_line(
    printed: str, wanted: str, missing: list[str]
) -> None:
    assert expected(printed, wanted) == missing
