"""docs/guide.md runs as printed (issue #50 §3): every ``bash`` block, in order, in one shell,
against the suite's Elasticsearch, its OpenLDAP server and a real ``retrieval-svc serve`` the
guide starts itself; a ``text`` block introduced by "prints" is what the block before it must
print (a line's ``…`` stands for anything). The Chinese twin carries the same commands."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from tests.support import ES_URL
from tests.support.fake_provider import free_port

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
TWIN = ROOT / "docs" / "guide.zh-CN.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)


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
    assert [body for body, _ in steps(TWIN)] == ours


def test_the_guide_runs_as_printed(
    ldap_server: str, tmp_path: Path, es_sync: Elasticsearch
) -> None:
    alias = f"rsvc-test-guide-{uuid.uuid4().hex[:8]}"
    script = ["set -eo pipefail"]
    for n, (body, _) in enumerate(steps(GUIDE)):
        script += [f"echo '@@step {n}@@'", body]
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "RSVC_ES_URL": ES_URL,
        "RSVC_INDEX_ALIAS": alias,
        "LDAP_URL": ldap_server,
        "RSVC_PORT": str(free_port()),
    }
    env.pop("RSVC_API_KEYS_FILE", None)
    env.pop("RSVC_CASBIN_DB_URL", None)
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
    outputs = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"@@step (\d+)@@\n(.*?)(?=@@step \d+@@\n|\Z)", printed, re.S)
    }
    assert shell.returncode == 0, printed[-4000:]
    for n, (body, wanted) in enumerate(steps(GUIDE)):
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
