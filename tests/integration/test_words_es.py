"""The command lines speak the reader's language (issue #58 §3): every line ``retrieval-indexer
index`` and ``show`` print — a summary, a failure, a file passed over — is a row of
``retrieval_svc.words`` in Chinese under a Chinese locale, and in English otherwise; the reasons
they carry come from the console's table (``retrieval_svc.reasons``)."""

from __future__ import annotations

import os
import re
import string
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.words import LINES
from tests.support import ES_URL

CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]


def rows(lang: int) -> list[re.Pattern[str]]:
    """Each row of the table in one language, as a pattern of a whole printed line."""
    found = []
    for pair in LINES.values():
        parts = string.Formatter().parse(pair[lang])
        found.append(
            re.compile(
                "".join(re.escape(text) + (".*?" if name else "") for text, name, _, _ in parts)
            )
        )
    return found


def printed(argv: list[str], lang: str, alias: str) -> list[str]:
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias,
           "RSVC_EMBEDDER": "none", "LANG": lang, "LC_ALL": "", "LC_MESSAGES": "",
           "RSVC_LANG": ""}  # fmt: skip
    done = subprocess.run([*CLI, *argv], env=env, capture_output=True, text=True, timeout=300)
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


@pytest.mark.parametrize(("lang", "column"), [("zh_CN.UTF-8", 1), ("C.UTF-8", 0)])
def test_every_line_the_indexer_prints_is_a_row_of_the_table(
    tmp_path: Path, es_sync: Elasticsearch, lang: str, column: int
) -> None:
    share = tmp_path / "share"
    share.mkdir()
    (share / "通知.md").write_text("# 通知\n\n下周停电。\n", encoding="utf-8")
    (share / "坏.pdf").write_text("not a pdf", encoding="utf-8")  # (fails)
    (share / "图.vsdx").write_text("x", encoding="utf-8")  # (passed over)
    alias = f"rsvc-test-words-{uuid.uuid4().hex[:8]}"
    kb = ["--knowledge-id", "words"]
    try:
        lines = printed(["index", str(share), *kb, "--workers", "1"], lang, alias)
        lines += printed(["show", *kb], lang, alias)
    finally:
        es_sync.options(ignore_status=404).indices.delete(index=f"{alias}*")
    patterns = rows(column)
    strays = [line for line in lines if not any(p.fullmatch(line) for p in patterns)]
    assert not strays, strays
    text = "\n".join(lines)
    cjk = re.search(r"失败 坏\.pdf：.*[\u4e00-\u9fff]", text)  # (the reason too, from the table)
    assert (cjk is not None) == (column == 1), text
    assert len(lines) >= 8, lines
