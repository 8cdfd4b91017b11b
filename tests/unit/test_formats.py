"""What each format becomes (issue #34 §1, §3): tables that name their columns, headings that
start chunks, running headers dropped, columns read in order, and the marks of OCR. The
files are made by bench.formats.render, as the format benchmark makes them."""

from __future__ import annotations

import difflib
import io
import re

import pytest

from bench.formats import render, renderers
from indexer.budget import Budget
from indexer.documents import DocumentError
from indexer.formats.base import Reading
from indexer.parsers import parse

SECTIONS = [
    ("变压器巡检", "干式变压器T-02的型号为SCB13-800，额定容量800 kVA，巡检周期为每两周一次。"),
    ("配电房管理", "配电房每天由值班电工巡视，记录温度、湿度和异常声响，发现问题立即上报。"),
    ("电梯维保", "电梯每十五日维保一次，年检由特种设备检验机构进行，结果张贴于轿厢内。"),
]
TEXT_ONLY = Reading(ocr="off")


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def kept(source: str, read: str) -> float:
    """The share of ``source``'s characters (whitespace aside) that ``read`` holds in order."""
    matcher = difflib.SequenceMatcher(None, squeeze(source), squeeze(read), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(squeeze(source))


def test_xlsx_rows_name_their_columns_under_the_sheet_name() -> None:
    parsed = parse("设备台账.xlsx", render.xlsx(SECTIONS), TEXT_ONLY)
    lines = parsed.text.split("\n\n")
    assert lines[0] == "## 知识条目"
    assert lines[1] == f"编号: 1 · 标题: 变压器巡检 · 内容: {SECTIONS[0][1]}"
    assert parsed.title == "设备台账"  # the file's name, not the sheet's
    assert parsed.info["format"] == "xlsx" and parsed.info["pages"] == 1


def test_xlsx_hidden_sheets_are_left_out_and_counted_formulas_never_run() -> None:
    data = render.xlsx(SECTIONS, formula=True, hidden="内部核算表")
    parsed = parse("a.xlsx", data, TEXT_ONLY)
    assert "内部核算表" not in parsed.text
    assert parsed.info["hidden_sheets"] == 1
    # openpyxl saved the formula without a value: the cell is empty, never "=1+1" evaluated
    assert "=1+1" not in parsed.text and "编号: 合计" in parsed.text


def test_csv_gb18030_with_semicolons_and_tsv() -> None:
    data = render.delimited(SECTIONS, delimiter=";", encoding="gb18030")
    parsed = parse("a.csv", data, TEXT_ONLY)
    assert f"标题: 电梯维保 · 内容: {SECTIONS[2][1]}" in parsed.text
    tsv = parse("a.tsv", render.delimited(SECTIONS, delimiter="\t"), TEXT_ONLY)
    assert "标题: 配电房管理" in tsv.text


def test_pptx_slide_titles_are_headings_with_tables_and_notes() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation(io.BytesIO(render.pptx(SECTIONS)))
    slide = deck.slides[0]
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    for (r, c), value in {
        (0, 0): "型号",
        (0, 1): "容量",
        (1, 0): "SCB13-800",
        (1, 1): "800 kVA",
    }.items():
        table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "讲解时强调安全距离。"
    buf = io.BytesIO()
    deck.save(buf)
    parsed = parse("a.pptx", buf.getvalue(), TEXT_ONLY)
    blocks = parsed.text.split("\n\n")
    assert blocks[0] == "## 变压器巡检" and blocks[1] == SECTIONS[0][1]
    assert "型号: SCB13-800 · 容量: 800 kVA" in blocks and "讲解时强调安全距离。" in blocks
    assert parsed.title == "变压器巡检" and parsed.info["pages"] == 3


def test_docx_tables_stay_where_they_stand() -> None:
    import docx

    document = docx.Document()
    document.add_heading("设备参数", level=1)
    table = document.add_table(rows=2, cols=3)
    for i, value in enumerate(["型号", "额定容量", "巡检周期", "SCB13-800", "800 kVA", "每两周"]):
        table.cell(i // 3, i % 3).text = value
    document.add_paragraph("以上参数以铭牌为准。")
    buf = io.BytesIO()
    document.save(buf)
    blocks = parse("a.docx", buf.getvalue()).text.split("\n\n")
    assert blocks == [
        "# 设备参数",
        "型号: SCB13-800 · 额定容量: 800 kVA · 巡检周期: 每两周",
        "以上参数以铭牌为准。",
    ]


@pytest.mark.parametrize("columns", [1, 2])
def test_pdf_headings_order_and_running_header(columns: int) -> None:
    sections = SECTIONS * 16  # several pages, so the running header recurs
    parsed = parse("a.pdf", render.pdf(sections, columns=columns), TEXT_ONLY)
    text = parsed.text
    assert render.HEADER not in text and not re.search(r"(?m)^- \d+ -$", text)
    headings = re.findall(r"(?m)^#+ (.+)$", text)
    assert headings == [h for h, _ in sections]
    unmarked = re.sub(r"(?m)^#+ ", "", text)
    assert squeeze(unmarked) == squeeze("".join(f"{h}{t}" for h, t in sections))  # in order
    assert parsed.info["pages"] >= 2 and parsed.info["ocr_pages"] == 0
    assert parsed.title == "设备运维知识库"


def test_pdf_table_rows_name_their_columns() -> None:
    parsed = parse("a.pdf", render.pdf(SECTIONS, table=True), TEXT_ONLY)
    rows = [b for b in parsed.text.split("\n\n") if b.startswith("编号:")]
    assert len(rows) == 3
    assert squeeze(rows[0]) == squeeze(f"编号: 1 · 标题: 变压器巡检 · 内容: {SECTIONS[0][1]}")


def test_scanned_pdf_off_is_a_failure_that_says_why() -> None:
    with pytest.raises(DocumentError, match="--ocr is off"):
        parse("a.pdf", render.scanned_pdf(SECTIONS[:1]), TEXT_ONLY)
    with pytest.raises(DocumentError, match="--ocr is off"):
        parse("a.png", render.png(SECTIONS[:1]), TEXT_ONLY)


def test_old_binary_office_files_say_what_to_do() -> None:
    from indexer.formats.sniff import OLE

    with pytest.raises(DocumentError, match=r"LibreOffice could not read this Word 97-2003"):
        parse("old.doc", OLE + b"\0" * 512)
    with pytest.raises(DocumentError, match=r"LibreOffice could not read this PowerPoint"):
        parse("old.ppt", OLE + b"\0" * 512)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("a.xlsx", b"%PDF-1.7\n...", "named .xlsx but it is a PDF"),
        ("a.pdf", b"PK\x03\x04rest", "named .pdf but it is a zip"),
        ("a.md", b"\x89PNG\r\n\x1a\n....", "named .md but it is a PNG image"),
        ("a.csv", b"a,b\n\x00\x01\x02", "binary"),
        (
            "a.docx",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + "EncryptionInfo".encode("utf-16-le"),
            "password-protected",
        ),
        ("a.xlsx", b"PK\x03\x04 not really a zip", "cannot be read"),
        ("a.pptx", b"PK\x03\x04 not really a zip", "cannot be read"),
        ("a.pdf", b"%PDF-1.4\n1 0 obj\n<<", "PDF cannot be read"),
        ("a.png", b"\x89PNG\r\n\x1a\nbroken", "image cannot be read"),
    ],
)
def test_lying_corrupt_and_encrypted_files_fail_with_a_reason(
    name: str, data: bytes, reason: str
) -> None:
    with pytest.raises(DocumentError, match=reason):
        parse(name, data)


def test_encrypted_pdf_is_refused() -> None:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, encrypt="secret")
    pdf.drawString(72, 720, "confidential")
    pdf.save()
    with pytest.raises(DocumentError, match="password-protected"):
        parse("a.pdf", buf.getvalue())


def test_limits_on_pages_slides_sheets_and_unpacked_bytes() -> None:
    small = Reading(Budget(max_pages=2, max_unpacked_bytes=10_000_000), ocr="off")
    with pytest.raises(DocumentError, match="--max-pages"):
        parse("a.pdf", render.pdf(SECTIONS * 20), small)
    with pytest.raises(DocumentError, match=r"3 slides.*--max-pages"):
        parse("a.pptx", render.pptx(SECTIONS), small)
    tight = Reading(Budget(max_unpacked_bytes=1000), ocr="off")
    with pytest.raises(DocumentError, match="--max-unpacked-bytes"):
        parse("a.xlsx", render.xlsx(SECTIONS), tight)
    with pytest.raises(DocumentError, match="--max-chars"):
        parse("a.csv", render.delimited(SECTIONS * 50), Reading(Budget(max_chars=1000)))


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` × ``height`` pixels in a few bytes (a decompression bomb
    announces itself in its header: it is refused before a pixel is decoded)."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    data = zlib.compress(b"\0" * 64)
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(ihdr))
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + struct.pack(">I", len(data))
        + b"IDAT"
        + data
        + struct.pack(">I", zlib.crc32(b"IDAT" + data))
    )


def test_an_image_of_thirty_thousand_squared_pixels_is_refused_unread() -> None:
    with pytest.raises(DocumentError, match=r"30,000 × 30,000 pixels.*--max-pixels"):
        parse("bomb.png", png_header(30_000, 30_000))


def test_an_image_is_read_by_ocr_with_its_marks() -> None:
    parsed = parse("photo.png", render.png(SECTIONS))
    (part,) = parsed.parts
    assert part.marks["ocr"] is True and 0.8 < part.marks["ocr_confidence"] <= 1
    assert "page" not in part.marks  # one picture: no pages to tell apart
    headings = re.findall(r"(?m)^## (.+)$", part.text)
    assert headings == [h for h, _ in SECTIONS]  # taller lines: headings, so chunks start there
    matcher = difflib.SequenceMatcher(
        None, squeeze("".join(h + t for h, t in SECTIONS)), squeeze(part.text), autojunk=False
    )
    assert matcher.ratio() > 0.95
    assert parsed.info == {"format": "png", "pages": 1, "ocr_pages": 1}


@pytest.mark.parametrize("kind", ["scan-rot90", "scan-rot180", "scan-rot270", "scan-skew3",
                                  "scan-seal", "photo"])  # fmt: skip
def test_a_scan_as_it_comes_is_read_in_order(kind: str) -> None:
    # Issue #48 §3: a page fed sideways or upside down kept 2% of its characters (270°: a
    # third, its lines bottom first); each is now read turned, in reading order.
    suffix, renderer = renderers.RENDERERS[kind]
    (part,) = parse(f"scan{suffix}", renderer(SECTIONS[:2])).parts
    source = "".join(h + t for h, t in SECTIONS[:2])
    assert kept(source, part.text.replace("##", "")) >= 0.95, (kind, part.text)


@pytest.mark.parametrize("kind", ["pdf-rot90", "pdf-rot180", "pdf-rot270", "pdf-rotate90",
                                  "pdf-rotate270"])  # fmt: skip
def test_a_turned_page_of_an_image_only_pdf_reads_as_the_same_scan_as_an_image(kind: str) -> None:
    # Issue #56: a page turned inside a scanned PDF — the scan sideways or upside down, or an
    # upright scan turned by the page's /Rotate — is rendered for OCR as a viewer shows it
    # and read turned back, as the same page as an image is.
    image = "scan-rot" + kind.removeprefix("pdf-rotate").removeprefix("pdf-rot")
    source = "".join(h + t for h, t in SECTIONS[:2])
    reads = []
    for name in (kind, image):
        suffix, renderer = renderers.RENDERERS[name]
        (part,) = parse(f"scan{suffix}", renderer(SECTIONS[:2])).parts
        reads.append(kept(source, part.text.replace("##", "")))
    assert reads[0] >= 0.95 and reads[0] >= reads[1] - 0.02, (kind, reads)


@pytest.mark.parametrize("degrees", [-3.0, 3.0, 5.0])
def test_a_skewed_page_is_read_line_after_line(degrees: float) -> None:
    # Issue #48 §3: the engine reads a slanted line well, but sorted by their tops the lines
    # of a page skewed 3° interleaved (a line's end sits lower than the next line's start);
    # the boxes are levelled before the page is laid out.
    sections = [(h, t * 4) for h, t in SECTIONS]
    (part,) = parse("skewed.png", render.skewed(sections, degrees)).parts
    assert kept("".join(h + t for h, t in sections), part.text) >= 0.98, part.text
    assert re.findall(r"(?m)^## (.+)$", part.text) == [h for h, _ in SECTIONS]


def test_red_ink_is_read_apart_a_letterhead_first_and_a_seal_after_the_text() -> None:
    # Issue #48 §3: a red seal over the text joined the lines under it into one box (a page
    # kept 84% of its characters); a red letterhead (红头文件) must not be lost with it.
    from PIL import Image, ImageChops, ImageDraw, ImageFont

    sections = [(h, t * 4) for h, t in SECTIONS]  # (lines enough under the seal's ring)
    page = Image.open(io.BytesIO(render.sealed(sections))).convert("RGB")
    head = Image.new("RGB", page.size, "white")
    font = ImageFont.truetype(str(render.cjk_font()), 40)
    ImageDraw.Draw(head).text((page.width // 2, 40), "华信物业管理有限公司文件", fill=(200, 20, 20),
                              font=font, anchor="mt")  # fmt: skip
    buf = io.BytesIO()
    ImageChops.multiply(page, head).save(buf, format="PNG")
    (part,) = parse("盖章.png", buf.getvalue()).parts
    paragraphs = part.text.split("\n\n")
    assert squeeze(paragraphs[0]).lstrip("#") == "华信物业管理有限公司文件"
    assert squeeze(paragraphs[-1]) == "合同专用章"  # the seal's words, after the text
    assert kept("".join(h + t for h, t in sections), part.text) >= 0.98, part.text


def test_a_pdf_of_text_and_scanned_pages_is_read_page_by_page() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for blob in (render.pdf(SECTIONS[:1]), render.scanned_pdf(SECTIONS[1:2])):
        for page in PdfReader(io.BytesIO(blob)).pages:
            writer.add_page(page)
    buf = io.BytesIO()
    writer.write(buf)
    parsed = parse("mixed.pdf", buf.getvalue())
    text, scanned = parsed.parts
    assert text.marks == {} and SECTIONS[0][1][:20] in squeeze(text.text)
    assert scanned.marks["ocr"] is True and scanned.marks["page"] == 2
    assert squeeze(SECTIONS[1][1])[:20] in squeeze(scanned.text)
    assert parsed.info["pages"] == 2 and parsed.info["ocr_pages"] == 1
    forced = parse("mixed.pdf", buf.getvalue(), Reading(ocr="force"))
    assert all(p.marks.get("ocr") for p in forced.parts) and forced.info["ocr_pages"] == 2


def test_ocr_asks_for_time_per_page() -> None:
    asked: list[float] = []
    reading = Reading(Budget(ocr_page_seconds=42), grant=asked.append)
    parse("scan.pdf", render.scanned_pdf(SECTIONS[:1]), reading)
    assert asked == [42]


def test_xls_the_97_2003_format_names_its_columns_and_hides_what_is_hidden() -> None:
    import xlwt

    book = xlwt.Workbook()
    sheet = book.add_sheet("设备参数")
    for r, row in enumerate([["型号", "额定容量"], ["SCB13-800", "800 kVA"], ["SCB13-1000", 1000]]):
        for c, value in enumerate(row):
            sheet.write(r, c, value)
    hidden = book.add_sheet("核算")
    hidden.write(0, 0, "内部价格")
    hidden.visibility = 1
    buf = io.BytesIO()
    book.save(buf)
    parsed = parse("参数.xls", buf.getvalue())
    assert parsed.text.split("\n\n") == [
        "## 设备参数",
        "型号: SCB13-800 · 额定容量: 800 kVA",
        "型号: SCB13-1000 · 额定容量: 1000",
    ]
    assert parsed.info == {"format": "xls", "pages": 2, "hidden_sheets": 1}
    assert parsed.title == "参数"


@pytest.mark.parametrize("kind", ["eml", "msg"])
def test_a_mail_is_read_with_its_attachments_and_their_tables_as_rows(kind: str) -> None:
    # Issue #48 §1: mail kept in shares; each attachment read by its own reader, inside the
    # mail (whoever may read the mail may read its attachments).
    suffix, renderer = renderers.RENDERERS[kind]
    parsed = parse(f"通知{suffix}", renderer(SECTIONS))
    assert parsed.title == SECTIONS[0][0]
    assert parsed.front_matter["mail_from"] == ["张伟 <zhang.wei@example.com>"]
    assert parsed.front_matter["mail_to"] == ["李娜 <li.na@example.com>"]
    assert parsed.front_matter["mail_date"].startswith("2026-03-02")
    assert kept("".join(h + t for h, t in SECTIONS), parsed.text) >= 0.99
    sheet = next(p for p in parsed.parts if p.marks.get("attachment") == "附件表格.xlsx")
    heading, text = SECTIONS[-1]
    assert f"标题: {heading} · 内容: {text}" in sheet.text  # a row that names its columns
    assert parsed.info == {"format": kind, "attachments": 2}


def test_a_mail_names_what_it_could_not_read_and_reads_a_mail_inside_once() -> None:
    from email.message import EmailMessage

    inner = EmailMessage()
    inner["Subject"] = "原始邮件"
    inner.set_content("转发前的正文：电梯年检定于三月。")
    outer = EmailMessage()
    outer["Subject"] = "转发：原始邮件"
    outer.set_content("请查收。")
    outer.add_attachment(b"\x00\x01", "application", "octet-stream", filename="签名.bin")
    outer.add_attachment(inner)  # message/rfc822
    text = parse("转发.eml", outer.as_bytes()).text
    assert "电梯年检定于三月" in text  # the forwarded mail, one level down
    assert "附件（未读取其内容）：签名.bin" in text


def test_an_outlook_mail_attached_to_a_msg_is_read_one_level_down() -> None:
    # Issue #56 §5: extract-msg gives an attached mail (an Outlook item) as a message, not
    # bytes; it was dropped in silence. A mail inside that one is named, not read.
    from bench.formats.msg import Attached, msg

    wang, zhao = ("王芳", "wang.fang@example.com"), ("赵敏", "zhao.min@example.com")
    forwarded = Attached(
        "转发：报价.msg", "电缆报价", "报价单：YJV-3x95 每米二百一十元。", zhao, [wang]
    )
    note = ("说明.txt", "附件说明".encode())
    data = msg(
        "转发：电缆报价", "请查收。", wang, [("李强", "li.qiang@example.com")], [forwarded, note]
    )
    parsed = parse("转发.msg", data)
    part = next(p for p in parsed.parts if p.marks.get("attachment") == "转发：报价.msg")
    assert "## 电缆报价" in part.text and "YJV-3x95 每米二百一十元" in part.text
    assert "赵敏 <zhao.min@example.com>" in part.text
    assert any("附件说明" in p.text for p in parsed.parts)
    assert parsed.info["attachments"] == 2


def test_an_epub_is_read_in_the_order_of_its_spine() -> None:
    parsed = parse("手册.epub", renderers.RENDERERS["epub"][1](SECTIONS))
    assert parsed.title == SECTIONS[0][0] and parsed.info["format"] == "epub"
    headings = re.findall(r"(?m)^# (.+)$", parsed.text)
    assert headings == [h for h, _ in SECTIONS]  # (its files were written in reverse)


def test_a_scanned_table_comes_out_as_rows_that_name_their_columns() -> None:
    # Issue #48 §3: cells from the engine's boxes — lines of aligned short cells are a table.
    rows = [
        ["编号", "设备", "型号", "巡检周期"],
        ["1", "干式变压器", "SCB13-800", "每两周"],
        ["2", "高压开关柜", "KYN28A-12", "每月"],
        ["3", "消防水泵", "XBD8/40G", "每周"],
    ]
    text = parse("台账.png", render.scanned_table(rows)).text
    assert "编号: 2 · 设备: 高压开关柜 · 型号: KYN28A-12 · 巡检周期: 每月" in text, text
    assert len(text.split("\n\n")) == 3  # a row a paragraph, the header in each
