"""Every reason the indexer gives has a code and a Chinese sentence that says what happened and
what to do (issue #48 §5). The reasons are made by the indexer's own code — the budget, the
parsers, the listing, the rules — not written out here, so a reworded message that no row
reads any more fails this test instead of reaching the console untranslated."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from bench.formats import render
from indexer.budget import Budget
from indexer.documents import DocumentError, split_front_matter
from indexer.formats.base import Reading
from indexer.formats.sniff import OLE
from indexer.parsers import parse
from indexer.passing_over import SCRATCH_REASON, PassedOver, odd_key
from indexer.report import Report
from indexer.sources import LINK_REASON, LocalSource, ObjectRef
from indexer.unlisted import another_source
from retrieval_svc import reasons

SECTIONS = [("变压器巡检", "干式变压器T-02的型号为SCB13-800，额定容量800 kVA。")]


def failed(call: object, *args: object) -> str:
    try:
        call(*args)  # type: ignore[operator]
    except (DocumentError, ValueError) as exc:
        return str(exc)
    raise AssertionError(f"{call} did not fail")


def indexer_failures(tmp_path: Path) -> list[str]:
    budget = Budget(max_bytes=10, max_chars=10, max_pages=1, max_pixels=10, max_unpacked_bytes=10)
    out = [
        failed(budget.check_bytes, 11),
        failed(budget.check_chars, 11),
        failed(budget.check_pages, 3),
        failed(budget.check_pages, 3, "the deck has", "slides"),
        failed(budget.check_pixels, 30_000, 30_000),
        failed(budget.check_unpacked, 11),
        failed(Budget(max_entries=2).check_unpacked, 0, 3),
        str(budget.timed_out()),
        str(budget.timed_out(120)),
        str(budget.out_of_memory()),
        failed(parse, "a.vsdx", b"x"),
        failed(parse, "a.xlsx", b"%PDF-1.7\n..."),
        failed(parse, "a.csv", b"a,b\n\x00\x01\x02"),
        failed(parse, "a.docx", OLE + "EncryptionInfo".encode("utf-16-le")),
        failed(parse, "a.xlsx", b"PK\x03\x04 not really a zip"),
        failed(parse, "a.pptx", b"PK\x03\x04 not really a zip"),
        failed(parse, "a.pdf", b"%PDF-1.4\n1 0 obj\n<<"),
        failed(parse, "a.png", b"\x89PNG\r\n\x1a\nbroken"),
        failed(parse, "a.png", render.png(SECTIONS), Reading(ocr="off")),
        failed(parse, "a.txt", "巡检".encode("utf-16-be")[1:] + b"\xff\xfe\xfd"),
        failed(parse, "old.doc", OLE + b"\0" * 512),
        failed(split_front_matter, "---\ntitle: x\n"),
        failed(split_front_matter, "---\n- a\n---\n"),
    ]
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, encrypt="secret")
    pdf.drawString(72, 720, "confidential")
    pdf.save()
    out.append(failed(parse, "a.pdf", buf.getvalue()))
    from indexer.formats import convert

    real = convert.soffice
    convert.soffice = lambda: None  # type: ignore[assignment]  # (LibreOffice not installed)
    try:
        out.append(failed(parse, "a.wps", OLE + b"\0" * 512))
    finally:
        convert.soffice = real  # type: ignore[assignment]
    return out + source_failures(tmp_path)


def source_failures(tmp_path: Path) -> list[str]:
    """What reading a folder gives: a link where a file was listed, a sidecar that is a link,
    a folder that cannot be listed, a document another source wrote."""
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    (root / "人事.md").write_text("机密", encoding="utf-8")
    (root / "公共" / "a.md").symlink_to(root / "人事.md")
    (root / "公共" / "b.md").write_text("公开", encoding="utf-8")
    (root / "公共" / "b.md.meta.json").symlink_to(root / "人事.md")
    source = LocalSource(root)
    a = ObjectRef("公共/a.md", "", "", 0, "local:公共/a.md")
    b = ObjectRef("公共/b.md", "", "", 0, "local:公共/b.md")
    unlisted = OSError(13, "Permission denied", str(root / "法务"))
    return [
        failed(source.read, a),
        failed(source.sidecar, b),
        source._why(unlisted),  # (the folder's own failure; its documents' below)
        f"法务/ {source._why(unlisted)}",
        another_source("/srv/old-share", str(root)),
    ]


def test_every_failure_the_indexer_gives_has_a_code_and_a_chinese_sentence(
    tmp_path: Path,
) -> None:
    for text in indexer_failures(tmp_path):
        code = reasons.failure_code(text)
        assert code != "other", f"no row reads {text!r}: add one to retrieval_svc/reasons.py"
        chinese = reasons.failure_text(text, "zh")
        assert re.search(r"[\u4e00-\u9fff]", chinese) and "{" not in chinese, (text, chinese)
        assert "：" in chinese, f"{chinese!r} does not say what to do"
        assert reasons.failure_text(text, "en") == text


def test_a_withdrawn_document_says_so_in_either_language() -> None:
    report = Report(source="s", knowledge_id="kb")
    report.withdraw("财务/预算.xlsx", "d1", "parsing needed more than 64 MB (--doc-memory-mb)")
    (failure,) = report.failures
    assert failure["code"] == "limit_memory"
    said = reasons.failure_text(failure["reason"], "zh")
    assert said.startswith("解析所需内存超过 64 MB") and said.endswith("不再对任何人可见）")


def test_what_the_listing_passes_over_has_a_code_and_a_chinese_name() -> None:
    listing = PassedOver()
    listing.excluding(["archive/**"], "--exclude")
    found = [
        SCRATCH_REASON,
        "unsupported .vsdx",
        "unsupported (no suffix)",
        str(odd_key("docs//a.md")),
        LINK_REASON,
        "not a regular file (a FIFO, device or socket)",
    ]
    listing.unwanted("archive/old.md")
    found += list(listing.counts)
    for text in found:
        assert reasons.passed_over_code(text) != "other", text
        assert re.search(r"[\u4e00-\u9fff]", reasons.passed_over_text(text, "zh")), text


@pytest.mark.parametrize(
    ("source", "chinese"),
    [
        ("rule (财务/**) of acl-rules.yaml", "acl-rules.yaml 中的规则（财务/**）"),
        ("rule (hr/**, override) of rules.yaml", "rules.yaml 中的规则（hr/**，优先）"),
        ("rule 1 (财务/**) of acl-rules.yaml", "acl-rules.yaml 的第 1 条规则（财务/**）"),
        ("rule 3 (hr/**, override) of rules.yaml", "rules.yaml 的第 3 条规则（hr/**，优先）"),
        ("unmatched: public, in acl-rules.yaml", "acl-rules.yaml 的 unmatched: public"),
        ("tag access_roles", "对象标签 access_roles"),
        ("sidecar", "附属文件"),
        ("front matter", "front matter"),
    ],
)
def test_what_set_a_documents_roles_reads_in_chinese(source: str, chinese: str) -> None:
    assert reasons.roles_source_text(source, "zh") == chinese
    assert reasons.roles_source_text(source, "en") == source


def test_failures_for_want_of_libreoffice_are_counted_by_suffix() -> None:
    report = Report(source="s", knowledge_id="kb")
    for name in (".doc", ".doc", ".wps"):
        report.fail(f"a{name}", f"{name} (x) files are read through LibreOffice: install it")
    report.fail("b.pdf", "no text to index")
    assert report.needs_libreoffice == {".doc": 2, ".wps": 1}


def test_a_reason_is_read_by_its_own_row() -> None:
    # A LibreOffice failure mentions "password-protected" among its guesses: not encrypted.
    said = failed(parse, "old.doc", OLE + b"\0" * 512)
    assert reasons.failure_code(said) == "libreoffice_failed"
    assert reasons.failure_code(failed(Budget(max_pages=1).check_pages, 5)) == "limit_pages"
    assert reasons.failure_code("something new") == "other"
    assert reasons.failure_text("something new", "zh") == "something new"  # never lost
