"""Old and Chinese office formats (issue #48 §1): .doc, .ppt, .rtf, OpenDocument and WPS
Office's .wps/.et/.dps, made here from documents of our own by the real LibreOffice
(scripts/libreoffice.sh installs it), read through it at the fidelity of their Office Open
XML twins — tables as rows that name their columns."""

from __future__ import annotations

import difflib
import io
import subprocess
import tempfile
from pathlib import Path

import pytest

from indexer.documents import DocumentError
from indexer.formats import convert
from indexer.parsers import parse

PARAGRAPHS = [
    "第一章 考勤制度。员工每日九点前到岗打卡，迟到三次以上按事假半天计。",
    "第二章 休假。年假按工龄计算：满一年五天，满十年十天，满二十年十五天。",
    "物业服务中心负责配电房的日常巡检，每两周一次，记录存档三年。",
]
TABLE = [("项目", "金额", "负责人"), ("电费", "12,800", "王芳"), ("水费", "3,460", "李强")]


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("员工手册", 1)
    for text in PARAGRAPHS:
        document.add_paragraph(text)
    table = document.add_table(rows=len(TABLE), cols=len(TABLE[0]))
    for r, row in enumerate(TABLE):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "费用"
    for row in TABLE:
        sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx_bytes() -> bytes:
    import pptx

    deck = pptx.Presentation()
    for n, text in enumerate(PARAGRAPHS, start=1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"第{n}页 制度要点"
        slide.placeholders[1].text = text
        slide.notes_slide.notes_text_frame.text = f"讲稿{n}：请结合实例说明。"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


PROFILE = Path(tempfile.mkdtemp(prefix="rsvc-test-lo-"))  # (one profile: ~1 s less a file)


def made_by_libreoffice(data: bytes, suffix: str, target: str) -> bytes:
    """``data`` (a ``suffix`` file) saved by LibreOffice as ``target`` (a filter name
    LibreOffice knows: doc, rtf, odt, xls, ods, ppt, odp)."""
    exe = convert.soffice()
    assert exe, "LibreOffice is needed to make the fixtures: scripts/libreoffice.sh"
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / f"in{suffix}"
        source.write_bytes(data)
        profile = PROFILE.as_uri()
        subprocess.run(
            [exe, f"-env:UserInstallation={profile}", "--headless", "--convert-to", target,
             "--outdir", work, str(source)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        return (Path(work) / f"in.{target.split(':')[0]}").read_bytes()


def fidelity(got: str, want: str) -> float:
    return difflib.SequenceMatcher(None, got, want, autojunk=False).ratio()


def text_of(name: str, data: bytes) -> str:
    return "\n".join(part.text for part in parse(name, data).parts)


@pytest.fixture(scope="module")
def twins() -> dict[str, tuple[str, bytes]]:
    """Each old or Chinese format's file, and the Office Open XML file it was made from."""
    docx, xlsx, pptx = docx_bytes(), xlsx_bytes(), pptx_bytes()
    odt = made_by_libreoffice(docx, ".docx", "odt")
    # (.doc from the .odt: LibreOffice's own .docx import drops python-docx's bare tables on
    # the way to .doc; the .odt keeps them, as Word's own .doc files have them)
    doc, xls, ppt = (
        made_by_libreoffice(odt, ".odt", "doc:MS Word 97"),
        made_by_libreoffice(xlsx, ".xlsx", "xls"),
        made_by_libreoffice(pptx, ".pptx", "ppt"),
    )
    return {
        ".doc": (".docx", doc),
        ".wps": (".docx", doc),  # WPS Writer's own format is the Word 97-2003 binary one
        ".rtf": (".docx", made_by_libreoffice(docx, ".docx", "rtf")),
        ".odt": (".docx", odt),
        ".et": (".xlsx", xls),
        ".ods": (".xlsx", made_by_libreoffice(xlsx, ".xlsx", "ods")),
        ".ppt": (".pptx", ppt),
        ".dps": (".pptx", ppt),
        ".odp": (".pptx", made_by_libreoffice(pptx, ".pptx", "odp")),
    }


@pytest.mark.parametrize(
    "suffix", sorted([*convert.TARGETS, ".et", ".ods"])
)  # (sheets: read, not converted)
def test_each_format_reads_as_its_office_open_xml_twin(
    twins: dict[str, tuple[str, bytes]], suffix: str
) -> None:
    modern, data = twins[suffix]
    original = {".docx": docx_bytes, ".xlsx": xlsx_bytes, ".pptx": pptx_bytes}[modern]()
    want, got = text_of(f"a{modern}", original), text_of(f"手册{suffix}", data)
    assert fidelity(got, want) >= 0.99, (suffix, got[:300], want[:300])
    if modern in (".docx", ".xlsx"):  # a table is rows that name their columns
        assert "金额: 12,800" in got and "负责人: 王芳" in got, got
    assert parse(f"手册{suffix}", data).info["format"] == suffix[1:]


def test_an_old_word_file_named_docx_is_read_as_what_it_is(
    twins: dict[str, tuple[str, bytes]],
) -> None:
    _, doc = twins[".doc"]
    got = text_of("报告.docx", doc)
    assert fidelity(got, text_of("a.docx", docx_bytes())) >= 0.99


def test_without_libreoffice_the_reason_says_how_to_install_it(
    twins: dict[str, tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(convert, "soffice", lambda: None)
    with pytest.raises(DocumentError, match="libreoffice-core-nogui"):
        parse("手册.doc", twins[".doc"][1])


def test_a_damaged_file_is_a_failure_that_says_so() -> None:
    with pytest.raises(DocumentError, match="LibreOffice could not read this WPS Writer file"):
        parse("坏的.wps", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(2048))


def linking_odt(url: str, local: Path) -> bytes:
    """An OpenDocument text whose two pictures are links: one at ``url``, one a file on the
    host — what a document's author may point LibreOffice at."""
    import zipfile

    frame = (
        '<text:p><draw:frame draw:name="{n}" svg:width="2cm" svg:height="2cm"><draw:image '
        'xlink:href="{href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/>'
        "</draw:frame></text:p>"
    )
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" '
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
        'office:version="1.2"><office:body><office:text>'
        f"<text:p>{PARAGRAPHS[0]}</text:p>"
        + frame.format(n="a", href=url)
        + frame.format(n="b", href=local.as_uri())
        + "</office:text></office:body></office:document-content>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as odt:
        odt.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        odt.writestr("content.xml", content, zipfile.ZIP_DEFLATED)
        odt.writestr(
            "META-INF/manifest.xml",
            '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
            '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
            '<manifest:file-entry manifest:full-path="/" manifest:media-type='
            '"application/vnd.oasis.opendocument.text"/><manifest:file-entry '
            'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
            "</manifest:manifest>",
        )
    return out.getvalue()


def test_libreoffice_reaches_no_address_and_no_file_a_document_links(tmp_path: Path) -> None:
    import http.server
    import os
    import threading
    import time

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def setup(self) -> None:
            asked.append("connected")
            super().setup()

        def do_GET(self) -> None:
            asked.append(self.requestline)
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_OPTIONS = do_GET

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = tmp_path / "secret.png"
    secret.write_bytes(docx_bytes())  # (any bytes: what matters is whether it is opened)
    day_ago = time.time() - 3 * 86400
    os.utime(secret, (day_ago, day_ago))  # (relatime updates an access time this old)
    url = f"http://127.0.0.1:{server.server_address[1]}/picture.png"
    try:
        parsed = parse("linked.odt", linking_odt(url, secret))
    finally:
        server.shutdown()
        server.server_close()
    assert PARAGRAPHS[0] in parsed.text
    assert asked == [], asked  # no OPTIONS, HEAD or GET: not even a connection
    assert secret.stat().st_atime < day_ago + 60, "LibreOffice read the linked file"


def test_an_archive_bomb_is_refused_before_libreoffice_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import zipfile

    from indexer.budget import Budget
    from indexer.formats.base import Reading

    started: list[str] = []
    monkeypatch.setattr(convert, "convert", lambda *_: started.append("soffice") or b"")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as odt:
        odt.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        odt.writestr("content.xml", "<x>" + "巡检" * 2_000_000 + "</x>")  # 12 MB of text
    small = Reading(Budget(max_unpacked_bytes=10 * 1024 * 1024))
    with pytest.raises(DocumentError, match="--max-unpacked-bytes"):
        parse("bomb.odt", out.getvalue(), small)
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as odt:
        for i in range(60):
            odt.writestr(f"Pictures/{i}.png", b"")
    with pytest.raises(DocumentError, match="entries"):
        parse("many.odt", many.getvalue(), Reading(Budget(max_entries=50)))
    assert started == []
