"""Every format from a folder, through the CLI, into the real Elasticsearch (issue #34): what
each becomes as stored, the bad files beside them each failed with its reason, unsupported
files counted, and the whole run — OCR included — under the documented 1 GB."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bench.formats import render
from tests.support import ES_URL
from tests.support.processes import run_measured
from tests.unit.test_formats import SECTIONS, png_header

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

BOUND = 1024 * 1024 * 1024
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]


def xlsx_bomb(unpacked_mib: int = 700) -> bytes:
    """A small .xlsx whose one sheet unpacks to ``unpacked_mib`` MiB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("xl/worksheets/sheet1.xml", "w") as member:
            for _ in range(unpacked_mib):
                member.write(b" " * (1 << 20))
    return buf.getvalue()


def encrypted_pdf() -> bytes:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, encrypt="secret")
    pdf.drawString(72, 720, "salary table")
    pdf.save()
    return buf.getvalue()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    folder = tmp_path / "bucket"
    (folder / "财务").mkdir(parents=True)
    files = {
        "手册.pdf": render.pdf(SECTIONS * 10, columns=2),
        "参数表.pdf": render.pdf(SECTIONS, table=True),
        "规程.docx": render.docx(SECTIONS),
        "培训.pptx": render.pptx(SECTIONS),
        "台账.xlsx": render.xlsx(SECTIONS, hidden="内部核算"),
        "台账.csv": render.delimited(SECTIONS, encoding="gb18030"),
        "扫描件.pdf": render.scanned_pdf(SECTIONS),
        "照片.png": render.png(SECTIONS[:1]),
        # the bad ones
        "财务/炸弹.xlsx": xlsx_bomb(),
        "财务/巨图.png": png_header(30_000, 30_000),
        "财务/加密.pdf": encrypted_pdf(),
        "财务/假的.docx": render.pdf(SECTIONS[:1]),
        "财务/坏的.pptx": b"PK\x03\x04" + os.urandom(2048),
        "财务/旧版.doc": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1024),
        "财务/流程图.vsdx": b"PK\x03\x04",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def stored(es_sync: Any, alias: str) -> dict[str, list[dict[str, Any]]]:
    es_sync.indices.refresh(index=f"{alias}.default")
    hits = es_sync.search(
        index=f"{alias}.default",
        query={"term": {"knowledge_id": "bucket"}},
        size=1000,
        sort=[{"document_name": "asc"}, {"segment_position": "asc"}],
    )["hits"]["hits"]
    out: dict[str, list[dict[str, Any]]] = {}
    for hit in hits:
        out.setdefault(hit["_source"]["document_name"], []).append(hit["_source"])
    return out


def test_a_bucket_of_every_format_through_the_cli(bucket: Path, alias: str, es_sync: Any) -> None:
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    argv = [*CLI, "index", str(bucket), "--knowledge-id", "bucket", "--json"]
    run = run_measured(argv, env=env, timeout_s=1200)
    report = json.loads(run.stdout)
    reasons = {f["document"]: f["reason"] for f in report["failures"]}
    assert reasons.keys() == {
        "财务/炸弹.xlsx", "财务/巨图.png", "财务/加密.pdf", "财务/假的.docx", "财务/坏的.pptx",
        "财务/旧版.doc",
    }, reasons  # fmt: skip
    assert "--max-unpacked-bytes" in reasons["财务/炸弹.xlsx"]
    assert "30,000 × 30,000 pixels" in reasons["财务/巨图.png"]
    assert "password-protected" in reasons["财务/加密.pdf"]
    assert "named .docx but it is a PDF" in reasons["财务/假的.docx"]
    assert "PPTX cannot be read" in reasons["财务/坏的.pptx"]
    assert "LibreOffice could not read this Word 97-2003 file" in reasons["财务/旧版.doc"]
    assert report["passed_over"] == {"unsupported .vsdx": 1}
    assert report["documents_indexed"] == 8 and run.returncode == 1
    assert run.peak_bytes < BOUND, f"peak {run.peak_bytes / 2**20:.0f} MB"

    docs = stored(es_sync, alias)
    sheet = docs["台账.xlsx"]
    assert sheet[0]["document_title"] == "台账" and sheet[0]["metadata"]["format"] == "xlsx"
    assert f"标题: 变压器巡检 · 内容: {SECTIONS[0][1]}" in sheet[0]["content"]
    assert all("内部核算" not in c["content"] for c in sheet)
    assert sheet[0]["metadata"]["headings"] == ["知识条目"]  # the sheet's name
    manual = docs["手册.pdf"]
    assert render.HEADER not in " ".join(c["content"] for c in manual)
    assert [c["metadata"]["headings"][-1] for c in manual[:3]] == [h for h, _ in SECTIONS]
    assert manual[0]["metadata"]["pages"] >= 2 and manual[0]["metadata"]["ocr_pages"] == 0
    for name in ("扫描件.pdf", "照片.png"):
        chunk = docs[name][0]
        assert chunk["metadata"]["ocr"] is True, name
        assert 0.8 < chunk["metadata"]["ocr_confidence"] <= 1, name
        assert "SCB13-800" in chunk["content"], name
    assert docs["扫描件.pdf"][0]["metadata"]["page"] == 1
    slides = docs["培训.pptx"]
    assert slides[0]["document_title"] == "变压器巡检" and slides[0]["metadata"]["pages"] == 3
    assert all("ocr" not in c["metadata"] for c in docs["规程.docx"])


def test_show_prints_a_document_as_stored(bucket: Path, alias: str) -> None:
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    for name in list(bucket.rglob("*")):
        if name.is_file() and name.name not in ("照片.png", "台账.xlsx"):
            name.unlink()
    argv = [*CLI, "index", str(bucket), "--knowledge-id", "bucket", "--prune"]
    assert run_measured(argv, env=env, timeout_s=600).returncode == 0
    listing = run_measured([*CLI, "show", "--knowledge-id", "bucket"], env=env, timeout_s=120)
    assert listing.returncode == 0, listing.stderr
    assert "default/bucket: 2 documents" in listing.stdout, listing.stdout
    assert "照片.png  [png, 1 page, 1 by OCR] 1 chunk — 变压器巡检" in listing.stdout
    assert "台账.xlsx  [xlsx, 2 pages] 1 chunk — 台账" in listing.stdout  # (one sheet hidden)
    chunks = run_measured(
        [*CLI, "show", "--knowledge-id", "bucket", "--document", "照片.png", "--json"],
        env=env,
        timeout_s=120,
    )
    (chunk,) = json.loads(chunks.stdout)["chunks"]
    assert chunk["position"] == 1 and chunk["access_roles"] == []
    assert 0.8 < chunk["ocr_confidence"] <= 1 and chunk["headings"] == [SECTIONS[0][0]]
    missing = run_measured(
        [*CLI, "show", "--knowledge-id", "bucket", "--document", "nope.md"], env=env, timeout_s=120
    )
    assert missing.returncode == 1 and "no document 'nope.md'" in missing.stderr
