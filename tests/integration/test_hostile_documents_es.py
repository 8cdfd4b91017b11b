"""No single document can take the indexer down (issue #37 §4): each hostile file, built here,
is indexed beside a good document through the CLI; the run ends by itself, the good document
is indexed, every hostile one is a failed document with its limit in the reason, and the peak
resident memory of the indexer and its workers — read from /proc — stays under the bound."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from retrieval_svc.search.runs import runs_index
from tests.support import ES_URL
from tests.support.processes import Measured, run_measured

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

BOUND = 1024 * 1024 * 1024  # the run's documented memory bound with the default budget
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]


def alias_bomb(path: Path) -> None:
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("---\n" + "\n".join(lines) + "\n---\n正文\n", encoding="utf-8")


def zip_bomb(path: Path, unpacked_mib: int = 1024) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as member:
            for _ in range(unpacked_mib):
                member.write(b"\0" * (1 << 20))


def many_pages(path: Path, pages: int) -> None:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    for i in range(pages):
        pdf.drawString(72, 720, f"page {i} inspection record")
        pdf.showPage()
    pdf.save()


def encrypted_pdf(path: Path) -> None:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), encrypt="secret")
    pdf.drawString(72, 720, "机密")
    pdf.save()


def pixel_bomb(path: Path) -> None:
    from PIL import Image

    Image.new("1", (20_000, 20_000)).save(path, optimize=True)  # 400 million pixels, ~60 KB


def hostile_mix(folder: Path) -> None:
    """The ten documents of the report beside the good one: bombs of every kind, a document
    that runs its worker out of memory while holding a large input, and plain bad files."""
    alias_bomb(folder / "bomb.md")
    zip_bomb(folder / "bomb.docx", unpacked_mib=600)
    zip_bomb(folder / "bomb.xlsx", unpacked_mib=600)
    pixel_bomb(folder / "bomb.png")
    many_pages(folder / "pages.pdf", 300)
    encrypted_pdf(folder / "secret.pdf")
    (folder / "lie.pdf").write_text("这不是PDF，只是文本。", encoding="utf-8")
    (folder / "nested.html").write_text("<div>" * 200_000 + "深" + "</div>" * 200_000)
    (folder / "wide.txt").write_text("巡检" * 20_000_000, encoding="utf-8")  # 120 MB, one line


def index(folder: Path, alias: str, *options: str) -> tuple[Measured, dict[str, Any]]:
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    argv = [*CLI, "index", str(folder), "--knowledge-id", kb_of(folder), "--json", *options]
    run = run_measured(argv, env=env, timeout_s=600)
    return run, json.loads(run.stdout)


def kb_of(folder: Path) -> str:
    """Each test's own knowledge base (two folders of one knowledge base are two sources)."""
    return "hostile-" + hashlib.sha256(str(folder).encode()).hexdigest()[:8]


def reasons(report: dict[str, Any]) -> dict[str, str]:
    return {f["document"]: f["reason"] for f in report["failures"]}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    good = tmp_path / "docs"
    good.mkdir()
    (good / "good.md").write_text("# 巡检\n\n巡检人员每天检查配电房。\n", encoding="utf-8")
    return good


def test_every_hostile_document_is_reported_and_the_run_stays_bounded(
    folder: Path, alias: str
) -> None:
    alias_bomb(folder / "bomb.md")
    zip_bomb(folder / "bomb.docx")
    (folder / "fat.txt").write_text("巡检" * 6_000_000, encoding="utf-8")  # 36 MB, one line
    (folder / "huge.txt").write_bytes(b"x" * 45_000_000)
    many_pages(folder / "pages.pdf", 300)
    run, report = index(
        folder, alias, "--doc-memory-mb", "64", "--max-doc-bytes", "40000000", "--max-pages", "100"
    )
    assert run.returncode == 1, run.stderr[-2000:]  # (some documents failed: exit 1)
    assert report["documents_indexed"] == 1 and report["documents_seen"] == 6, report
    why = reasons(report)
    assert "YAML alias" in why["bomb.md"]
    assert "--max-unpacked-bytes" in why["bomb.docx"]
    assert "--doc-memory-mb" in why["fat.txt"]
    assert "--max-doc-bytes" in why["huge.txt"]
    assert "--max-pages" in why["pages.pdf"]
    assert run.peak_bytes < BOUND, run.peak_bytes


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_worker_out_of_memory_that_also_retires_fails_its_document_only(
    folder: Path, alias: str, workers: str
) -> None:
    # A worker whose document ran it out of memory while it held a large input both failed
    # the document and retired; the parent took the error object for the chunks and the run
    # died with a traceback. Now every answer is read in one place.
    hostile_mix(folder)
    run, report = index(folder, alias, "--workers", workers, "--max-pages", "100")
    assert run.returncode == 1, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    why = reasons(report)
    # The deep HTML is read when its worker has the memory, and fails naming it when not.
    deep = why.pop("nested.html", None)
    assert deep is None or "--doc-memory-mb" in deep, deep
    assert report["documents_seen"] == 10, report
    assert report["documents_indexed"] == 1 + (deep is None), report
    assert set(why) == {
        "bomb.md", "bomb.docx", "bomb.xlsx", "bomb.png", "pages.pdf", "secret.pdf", "lie.pdf",
        "wide.txt",
    }, why  # fmt: skip
    assert "YAML alias" in why["bomb.md"]
    assert "--max-unpacked-bytes" in why["bomb.docx"] and "--max-unpacked-bytes" in why["bomb.xlsx"]
    assert "--max-pixels" in why["bomb.png"]
    assert "--max-pages" in why["pages.pdf"]
    assert "--doc-memory-mb" in why["wide.txt"]
    assert run.peak_bytes < BOUND, run.peak_bytes


def test_a_document_past_its_deadline_is_stopped(folder: Path, alias: str) -> None:
    many_pages(folder / "slow.pdf", 5000)  # seconds of pypdf on any machine
    run, report = index(folder, alias, "--doc-timeout", "1")
    assert run.returncode == 1, run.stderr[-2000:]
    assert report["documents_indexed"] == 1, report["failures"]
    assert "--doc-timeout" in reasons(report)["slow.pdf"]
    assert run.peak_bytes < BOUND, run.peak_bytes


def test_a_worker_reading_scans_stays_while_it_holds_little(folder: Path, alias: str) -> None:
    # Issue #48 §4: a worker that read a page by OCR used to retire after its document, so a
    # folder of one-page scans started a worker (and loaded both models) for every image.
    from bench.formats import render

    for i in range(4):
        text = f"第{i}号设备巡检记录：配电柜温度正常，电缆接头无发热，记录人签字确认。"
        (folder / f"扫描{i}.png").write_bytes(render.png([(f"巡检记录 {i}", text)]))
    run, report = index(folder, alias, "--workers", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    assert report["documents_indexed"] == 5, report["failures"]
    assert report["parser_workers_started"] == 1, report  # one engine load for every image
    assert run.peak_bytes < BOUND, run.peak_bytes


def test_without_libreoffice_old_office_files_fail_saying_how_to_install_it(
    folder: Path, alias: str
) -> None:
    # Issue #48 §1: on a machine without LibreOffice, .doc and WPS files are failed documents
    # whose reason says how to install it, and the summary counts them by suffix.
    from indexer.formats.sniff import OLE

    for name in ("报告.doc", "纪要.doc", "汇报.dps"):  # (sheets: read without it)
        (folder / name).write_bytes(OLE + bytes(512))
    bare = str(Path(sys.executable).parent)  # (the programs of the virtualenv, no soffice)
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias,
           "RSVC_EMBEDDER": "none", "PATH": bare}  # fmt: skip
    argv = [*CLI, "index", str(folder), "--knowledge-id", "no-office"]
    run = run_measured(argv, env=env, timeout_s=600)
    assert run.returncode == 1, run.stderr[-2000:]
    said = " ".join(run.stderr.split())
    assert "3 failed for want of LibreOffice (.doc 2, .dps 1)" in said, said
    assert "scripts/libreoffice.sh" in said


def test_what_the_listing_passed_over_is_in_the_summary_and_the_run_record(
    folder: Path, alias: str, es_sync: Any
) -> None:
    (folder / "plan.vsdx").write_bytes(b"x")
    (folder / "a.zip").write_bytes(b"x")
    (folder / "b.zip").write_bytes(b"x")
    os.mkfifo(folder / "pipe.md")
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    argv = [*CLI, "index", str(folder), "--knowledge-id", kb_of(folder)]
    run = run_measured(argv, env=env, timeout_s=600)
    assert run.returncode == 0, run.stderr[-2000:]  # passed over is not failed
    assert (
        "passed over 4: unsupported .zip 2, not a regular file (a FIFO, device or socket) 1, "
        "unsupported .vsdx 1" in " ".join(run.stderr.split())
    ), run.stderr
    record = es_sync.get(index=runs_index(alias, "default"), id=kb_of(folder))["_source"]
    assert record["passed_over"][0] == {
        "reason": "unsupported .zip", "code": "unsupported", "count": 2,
        "examples": ["a.zip", "b.zip"],
    }  # fmt: skip
