"""The file share as it really is (design.md §16, "the source as it is"): links, folders the
indexer cannot read, several sources in one knowledge base, and a rules file's case setting
for its excludes — each against the real Elasticsearch, through the CLI as an operator runs it.

Links are never followed: to a file or a folder, in a chain or a loop, inside the share or out,
for documents and sidecars alike; what a link points at is indexed where it lies, with its own
place's roles. A folder that cannot be listed fails the run and withdraws what was indexed
below it; it is never taken for an empty folder and pruned. A run prunes only its own source.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from tests.integration.test_convergence_es import Share, env, stored
from tests.support.corpus import TENANT

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

PUBLIC_RULES = """
unmatched: refuse
case: insensitive
exclude: [private/**]
rules:
  - match: public/**
    access_roles: []
  - match: hr/**
    access_roles: [hr]
  - match: legal/**
    access_roles: [legal]
  - match: "**"
    access_roles: [staff]
"""


@pytest.fixture
def share(corpus: str, tmp_path: Path, request: pytest.FixtureRequest) -> Share:
    made = Share(tmp_path, corpus, f"share-{request.node.name[-24:]}".lower())
    made.rules.write_text(PUBLIC_RULES, encoding="utf-8")
    return made


def failures(report: dict[str, Any]) -> dict[str, str]:
    return {f["document"]: f["reason"] for f in report["failures"]}


def all_metadata(alias: str, kb: str) -> str:
    """Every stored chunk of the knowledge base as JSON text (for what must not be there)."""
    from elasticsearch import Elasticsearch

    from tests.support import ES_URL
    from tests.support.corpus import own

    es = Elasticsearch(ES_URL)
    try:
        es.indices.refresh(index=own(alias))
        hits = es.search(index=own(alias), query={"term": {"knowledge_id": kb}}, size=500)
    finally:
        es.close()
    return json.dumps([h["_source"] for h in hits["hits"]["hits"]], ensure_ascii=False)


def test_no_link_publishes_what_it_points_at(share: Share, tmp_path: Path) -> None:
    salaries = share.write("hr/salaries.md", "# 薪酬\n\n总经理年薪一百万。")
    share.write("public/notes.md", "# 公告\n\n下周停电。")
    share.write("public/real.md", "# 通知\n\n正常上班。")
    key = tmp_path / "service-account.json"  # (outside the share)
    key.write_text(json.dumps({"private_key": "-----BEGIN KEY-----"}), encoding="utf-8")
    public = share.root / "public"
    (public / "q3-notes.md").symlink_to("../hr/salaries.md")  # a link to a restricted file
    (public / "notes.md.meta.json").symlink_to(key)  # a sidecar that is a link out
    (public / "hr-folder").symlink_to("../hr", target_is_directory=True)  # to a folder
    (public / "c2.md").symlink_to(salaries)  # a chain: c1 → c2 → salaries
    (public / "c1.md").symlink_to("c2.md")
    (public / "loop.md").symlink_to("loop.md")  # a loop
    first = share.index()
    assert stored(share.alias, share.kb) == {
        "hr/salaries.md": {("hr",)},
        "public/real.md": {()},
    }, first["failures"]
    assert (
        "sidecar public/notes.md.meta.json is a symbolic link" in failures(first)["public/notes.md"]
    )
    assert "private_key" not in all_metadata(share.alias, share.kb)
    assert first["passed_over"] == {"a symbolic link: not followed": 5}, first["passed_over"]
    # A link that changes its target, and a file replaced by a link, between runs.
    (public / "q3-notes.md").unlink()
    (public / "q3-notes.md").symlink_to("real.md")
    (public / "real.md").rename(share.root / "hr" / "real.md")
    (public / "real.md").symlink_to("../hr/real.md")
    again = share.index()
    assert stored(share.alias, share.kb) == {
        "hr/salaries.md": {("hr",)},
        "hr/real.md": {("hr",)},
    }, again["failures"]
    assert again["documents_pruned"] == 1, again


def test_a_link_swapped_in_after_the_listing_is_not_read(share: Share) -> None:
    from indexer.sources import LocalSource

    share.write("hr/salaries.md", "# 薪酬\n\n机密。")
    share.write("public/a.md", "# 公开\n\n正文。")
    source = LocalSource(share.root)
    (ref,) = [r for r in source.list() if r.key == "public/a.md"]
    (share.root / "public" / "a.md").unlink()
    (share.root / "public" / "a.md").symlink_to("../hr/salaries.md")
    from indexer.documents import DocumentError

    with pytest.raises(DocumentError, match="symbolic link"):
        source.read(ref)
    shutil.rmtree(share.root / "public")
    (share.root / "public").symlink_to("hr", target_is_directory=True)  # (a folder, too)
    with pytest.raises(DocumentError, match="symbolic link"):
        source.read(ref.__class__(**{**_fields(ref), "key": "public/salaries.md"}))


def _fields(ref: Any) -> dict[str, Any]:
    return {name: getattr(ref, name) for name in ref.__slots__}


def test_a_rules_file_reached_through_a_link_in_the_share_is_refused(share: Share) -> None:
    share.write("public/a.md", "# 公开\n\n正文。")
    inside = share.root / "acl-rules.yaml"
    inside.symlink_to(share.rules)
    run = CliRunner().invoke(
        indexer_cli,
        ["index", str(share.root), "--knowledge-id", share.kb, "--tenant", TENANT,
         "--acl-rules", str(inside), "--workers", "0"],
        env=env(share.alias),
    )  # fmt: skip
    assert run.exit_code == 2, run.output
    assert "reached through a symbolic link" in run.output


def index_without_root_powers(share: Share) -> tuple[int, dict[str, Any]]:
    """The CLI as an unprivileged indexer runs: root without the capabilities that let it
    read any file, so folder permissions hold for it."""
    argv = [
        "setpriv", "--bounding-set", "-dac_override,-dac_read_search",
        sys.executable, "-c", "from indexer.cli import app; app()",
        "index", str(share.root), "--knowledge-id", share.kb, "--json", "--tenant", TENANT,
        "--acl-rules", str(share.rules), "--workers", "0",
    ]  # fmt: skip
    done = subprocess.run(
        argv, env={**os.environ, **env(share.alias)}, capture_output=True, text=True, timeout=600
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def test_a_folder_that_cannot_be_listed_fails_the_run_and_is_withdrawn_not_pruned(
    share: Share,
) -> None:
    share.write("legal/contract.md", "# 合同\n\n保密条款。")
    share.write("public/a.md", "# 公开\n\n正文。")
    assert share.index()["ok"]
    assert "legal/contract.md" in stored(share.alias, share.kb)
    (share.root / "legal").chmod(0)
    try:
        code, report = index_without_root_powers(share)
    finally:
        (share.root / "legal").chmod(0o755)
    assert code == 1
    why = failures(report)
    assert why["legal/"].startswith("cannot be listed: PermissionError"), why
    assert "withdrawn" in why["legal/contract.md"], why
    assert report["documents_pruned"] == 0 and report["documents_withdrawn"] == 1, report
    assert stored(share.alias, share.kb) == {"public/a.md": {()}}
    back = share.index()  # readable again: back, with its roles
    assert back["ok"] and stored(share.alias, share.kb)["legal/contract.md"] == {("legal",)}


def test_two_sources_of_one_knowledge_base_prune_only_their_own(share: Share) -> None:
    hr, fin = share.root / "hr", share.root / "fin"
    share.write("hr/handbook.md", "# 手册\n\n员工守则。")
    share.write("fin/report.md", "# 报表\n\n季度利润。")
    share.write("fin/old.md", "# 旧报表\n\n去年。")
    assert share.index(source=hr)["ok"]
    assert share.index(source=fin)["ok"]
    (fin / "old.md").unlink()
    again = share.index(source=fin)  # the fin/ command again: prunes its own only
    assert again["documents_pruned"] == 1, again
    names = set(stored(share.alias, share.kb))
    assert names == {"handbook.md", "report.md"}, names
    # Two sources that would write one document: the second is refused, with the reason.
    share.write("fin/handbook.md", "# 另一本手册\n\n不同的内容。")
    clash = share.index(source=fin)
    assert not clash["ok"]
    assert "already indexed from another source" in failures(clash)["handbook.md"]
    assert str(hr) in failures(clash)["handbook.md"]
    assert stored(share.alias, share.kb)["handbook.md"] == {("staff",)}
    shown = CliRunner().invoke(
        indexer_cli,
        ["show", "--knowledge-id", share.kb, "--tenant", TENANT, "--json"],
        env=env(share.alias),
    )
    assert shown.exit_code == 0, shown.output
    sources = {s["source"]: s["documents"] for s in json.loads(shown.stdout)["sources"]}
    assert sources == {str(hr): 1, str(fin): 1}, sources


def test_exclude_follows_the_rules_file_s_case_setting(share: Share) -> None:
    share.write("Private/board-minutes.md", "# 董事会纪要\n\n并购计划。")
    share.write("public/a.md", "# 公开\n\n正文。")
    report = share.index()
    assert set(stored(share.alias, share.kb)) == {"public/a.md"}, report["failures"]
    assert report["passed_over"] == {"excluded (exclude of acl-rules.yaml)": 1}, report


def test_a_worker_s_temporary_files_leave_with_it_however_it_ends(
    share: Share, tmp_path: Path
) -> None:
    from tests.integration.test_hostile_documents_es import many_pages
    from tests.unit.test_office_conversion import docx_bytes, made_by_libreoffice

    odt = made_by_libreoffice(docx_bytes(), ".docx", "odt")
    for i in range(3):
        (share.root / "public").mkdir(exist_ok=True)
        (share.root / "public" / f"手册{i}.odt").write_bytes(odt)  # (LibreOffice profiles)
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    def index(*more: str) -> dict[str, Any]:
        argv = [
            sys.executable, "-c", "from indexer.cli import app; app()",
            "index", str(share.root), "--knowledge-id", share.kb, "--json", "--tenant", TENANT,
            "--acl-rules", str(share.rules), "--workers", "2", *more,
        ]  # fmt: skip
        done = subprocess.run(
            argv,
            env={**os.environ, **env(share.alias), "TMPDIR": str(scratch)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        return dict(json.loads(done.stdout))

    # Ending well: three conversions (each its LibreOffice profile), nothing left behind.
    report = index()
    assert report["documents_indexed"] == 3, report["failures"]
    assert list(scratch.iterdir()) == [], list(scratch.iterdir())
    # Killed: a worker stopped past --doc-timeout (a separate run, so the conversions above
    # never race a one-second limit on a busy machine).
    many_pages(share.root / "public" / "slow.pdf", 5000)
    report = index("--doc-timeout", "1")
    assert "--doc-timeout" in failures(report)["public/slow.pdf"], report["failures"]
    assert list(scratch.iterdir()) == [], list(scratch.iterdir())
