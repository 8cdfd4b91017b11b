"""The same passages written as the files a company keeps (issue #34 §5), for the format
benchmark and the tests: each renderer takes sections ``(heading, text)`` and returns the
file's bytes.

Born-digital files are made by the libraries that read them back (python-docx, python-pptx,
openpyxl) or by reportlab (PDF, with its built-in Chinese CID font); pictures of text (a PNG,
a scanned PDF) are drawn by Pillow with a Chinese TrueType font (Debian's
``fonts-wqy-zenhei``, which scripts/chromium.sh installs) at 150 dpi, as a scanner would.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape  # reportlab reads its paragraphs as markup

Section = tuple[str, str]
FONTS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
)
HEADER = "设备运维知识库 · 内部资料"
TABLE_COLUMNS = ("编号", "标题", "内容")
DPI = 150


def cjk_font() -> Path:
    """A Chinese TrueType font on this machine (FileNotFoundError names the package)."""
    for font in FONTS:
        if font.exists():
            return font
    raise FileNotFoundError("no Chinese font: install Debian's fonts-wqy-zenhei")


def markdown(sections: Sequence[Section]) -> bytes:
    return "\n\n".join(f"## {h}\n\n{t}" for h, t in sections).encode()


def docx(sections: Sequence[Section]) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    for heading, text in sections:
        document.add_heading(heading, level=2)
        document.add_paragraph(text)
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def pptx(sections: Sequence[Section]) -> bytes:
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    layout = deck.slide_layouts[1]  # title and content
    for heading, text in sections:
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = heading
        body = slide.placeholders[1].text_frame
        body.text = text
        for paragraph in body.paragraphs:
            for run in paragraph.runs:
                run.font.size = Pt(10)
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def rows(sections: Sequence[Section]) -> list[list[str]]:
    """A table of the passages: number, title, text."""
    return [list(TABLE_COLUMNS)] + [
        [str(i), heading, text] for i, (heading, text) in enumerate(sections, start=1)
    ]


def xlsx(sections: Sequence[Section], *, formula: bool = False, hidden: str = "") -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "知识条目"
    for row in rows(sections):
        sheet.append(row)
    if formula:  # a computed cell: openpyxl writes no cached value, as a script would
        sheet.append(["合计", "=1+1", ""])
    if hidden:
        secret = book.create_sheet("隐藏")
        secret.append(["备注", hidden])
        secret.sheet_state = "hidden"
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def delimited(sections: Sequence[Section], delimiter: str = ",", encoding: str = "utf-8") -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    writer.writerows(rows(sections))
    return buf.getvalue().encode(encoding)


def _styles() -> dict[str, Any]:
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    body = ParagraphStyle(
        "body", fontName="STSong-Light", fontSize=10, leading=15, wordWrap="CJK", spaceAfter=8
    )
    heading = ParagraphStyle(
        "heading", parent=body, fontSize=15, leading=20, spaceBefore=6, spaceAfter=6
    )
    cell = ParagraphStyle("cell", parent=body, fontSize=8, leading=11, spaceAfter=0)
    return {"body": body, "heading": heading, "cell": cell}


def _running(canvas: Any, document: Any) -> None:
    """A running header and a page number, on every page."""
    canvas.saveState()
    canvas.setFont("STSong-Light", 8)
    width, height = document.pagesize
    canvas.drawCentredString(width / 2, height - 30, HEADER)
    canvas.drawCentredString(width / 2, 24, f"- {document.page} -")
    canvas.restoreState()


def pdf(sections: Sequence[Section], *, columns: int = 1, table: bool = False) -> bytes:
    """A born-digital PDF: headings in a larger font; ``columns`` 2 lays the text out in two
    columns; ``table`` puts the passages in a ruled table instead; every page has a running
    header and a page number."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph, Table

    styles = _styles()
    buf = io.BytesIO()
    document = BaseDocTemplate(buf, pagesize=A4, title="设备运维知识库")
    width, height = A4
    margin, gap = 56, 24
    usable = width - 2 * margin
    if columns == 2:
        half = (usable - gap) / 2
        frames = [
            Frame(margin, margin, half, height - 2 * margin, id="left"),
            Frame(margin + half + gap, margin, half, height - 2 * margin, id="right"),
        ]
    else:
        frames = [Frame(margin, margin, usable, height - 2 * margin, id="body")]
    document.addPageTemplates([PageTemplate(frames=frames, onPage=_running)])
    story: list[Any] = []
    if table:
        data = [[Paragraph(escape(c), styles["cell"]) for c in row] for row in rows(sections)]
        grid = Table(data, colWidths=[30, 90, usable - 120], repeatRows=1)
        grid.setStyle(
            [("GRID", (0, 0), (-1, -1), 0.5, colors.black), ("VALIGN", (0, 0), (-1, -1), "TOP")]
        )
        story.append(grid)
    else:
        for heading, text in sections:
            story.append(Paragraph(escape(heading), styles["heading"]))
            story.append(Paragraph(escape(text), styles["body"]))
    document.build(story)
    return buf.getvalue()


def _wrap(text: str, font: Any, width: int) -> list[str]:
    lines, line = [], ""
    for char in text:
        if font.getlength(line + char) > width:
            lines.append(line)
            line = char
        else:
            line += char
    return [*lines, line] if line else lines


def page_images(sections: Sequence[Section], dpi: int = DPI) -> list[Any]:
    """The passages drawn on A4 pages at ``dpi``, as a scanner would give them."""
    from PIL import Image, ImageDraw, ImageFont

    scale = dpi / 72
    width, height = int(595 * scale), int(842 * scale)
    margin = int(56 * scale)
    basic = ImageFont.Layout.BASIC  # (raqm's shaping fails on some of CMRC's characters)
    body = ImageFont.truetype(str(cjk_font()), int(10.5 * scale), layout_engine=basic)
    big = ImageFont.truetype(str(cjk_font()), int(15 * scale), layout_engine=basic)
    pages: list[Any] = []
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    y = margin

    def advance(need: int) -> None:
        nonlocal page, draw, y
        if y + need > height - margin:
            pages.append(page)
            page = Image.new("L", (width, height), 255)
            draw = ImageDraw.Draw(page)
            y = margin

    for heading, text in sections:
        advance(int(40 * scale))
        draw.text((margin, y), heading, fill=0, font=big)
        y += int(26 * scale)
        for line in _wrap(text, body, width - 2 * margin):
            advance(int(17 * scale))
            draw.text((margin, y), line, fill=0, font=body)
            y += int(17 * scale)
        y += int(12 * scale)
    pages.append(page)
    return pages


def png(sections: Sequence[Section]) -> bytes:
    """The passages as one tall PNG page (a screenshot or a photo of a page)."""
    from PIL import Image

    pages = page_images(sections)
    sheet = Image.new("L", (pages[0].width, sum(p.height for p in pages)), 255)
    top = 0
    for page in pages:
        sheet.paste(page, (0, top))
        top += page.height
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return buf.getvalue()


def scanned_pdf(sections: Sequence[Section]) -> bytes:
    """A PDF whose pages are only pictures of text (no text layer), as every 扫描件 is."""
    pages = page_images(sections)
    buf = io.BytesIO()
    pages[0].save(buf, format="PDF", save_all=True, append_images=pages[1:], resolution=DPI)
    return buf.getvalue()


def _page(sections: Sequence[Section], dpi: int = DPI) -> Any:
    """The passages as one page image (the first page: an image holds one passage)."""
    return page_images(sections, dpi)[0]


def _encoded(picture: Any, fmt: str = "PNG", **options: Any) -> bytes:
    buf = io.BytesIO()
    picture.save(buf, format=fmt, **options)
    return buf.getvalue()


def rotated(sections: Sequence[Section], degrees: int) -> bytes:
    """A page fed into the scanner sideways or upside down (counter-clockwise ``degrees``)."""
    return _encoded(_page(sections).rotate(degrees, expand=True))


def rotated_pdf(sections: Sequence[Section], degrees: int, turn: str = "scan") -> bytes:
    """A scanned PDF whose page is turned counter-clockwise ``degrees``: the scan itself
    sideways or upside down (``scan``, the page as wide as the picture), or an upright scan
    on a page whose ``/Rotate`` turns it as a viewer shows it (``page``)."""
    if turn == "scan":
        page = _page(sections).rotate(degrees, expand=True)
        return _encoded(page, "PDF", resolution=DPI)
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for sheet in PdfReader(io.BytesIO(scanned_pdf(sections))).pages:
        writer.add_page(sheet.rotate(-degrees % 360))  # (/Rotate turns clockwise)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def skewed(sections: Sequence[Section], degrees: float = 3.0) -> bytes:
    """A page that went through the feeder at an angle."""
    from PIL import Image

    page = _page(sections).rotate(
        degrees, expand=True, fillcolor=255, resample=Image.Resampling.BICUBIC
    )
    return _encoded(page)


def sealed(sections: Sequence[Section]) -> bytes:
    """A page with a company's red seal stamped over its text (a circle, a star, the name
    around it), as a contract or an approved form has."""
    from PIL import Image, ImageChops, ImageDraw, ImageFont

    page = _page(sections).convert("RGB")
    seal = Image.new("RGB", page.size, "white")
    draw = ImageDraw.Draw(seal)
    red = (214, 40, 40)
    radius = page.width // 7
    cx, cy = page.width // 2, int(page.height * 0.12) + radius  # over the first paragraphs
    for width in range(6):
        draw.ellipse((cx - radius + width, cy - radius + width, cx + radius - width,
                      cy + radius - width), outline=red)  # fmt: skip
    font = ImageFont.truetype(str(cjk_font()), radius // 4)
    draw.text((cx, cy), "★", fill=red, font=font, anchor="mm")
    draw.text((cx, cy + radius // 2), "合同专用章", fill=red, font=font, anchor="mm")
    return _encoded(ImageChops.multiply(page, seal))  # ink under the seal stays dark


def scanned_table(rows: Sequence[Sequence[str]]) -> bytes:
    """A ruled table (its first row the header) printed and scanned at 150 dpi."""
    from PIL import Image, ImageDraw, ImageFont

    scale = DPI / 72
    font = ImageFont.truetype(
        str(cjk_font()), int(10.5 * scale), layout_engine=ImageFont.Layout.BASIC
    )
    widths = [
        max(int(font.getlength(str(r[c]))) for r in rows) + int(24 * scale)
        for c in range(len(rows[0]))
    ]
    height = int(26 * scale)
    left, top = int(56 * scale), int(80 * scale)
    page = Image.new("L", (int(595 * scale), int(842 * scale)), 255)
    draw = ImageDraw.Draw(page)
    for r, row in enumerate(rows):
        x = left
        for c, cell in enumerate(row):
            y = top + r * height
            draw.rectangle((x, y, x + widths[c], y + height), outline=0, width=2)
            draw.text((x + int(10 * scale), y + int(6 * scale)), str(cell), fill=0, font=font)
            x += widths[c]
    return _encoded(page)


def photographed(sections: Sequence[Section]) -> bytes:
    """A page photographed by phone: uneven light (darker towards a corner), a little blur
    and sensor noise, a grey paper tone, JPEG at quality 60."""
    import numpy as np
    from PIL import Image, ImageFilter

    page = _page(sections, dpi=200).convert("RGB").filter(ImageFilter.GaussianBlur(0.7))
    pixels = np.asarray(page).astype(np.float32)
    h, w = pixels.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    light = 1.0 - 0.35 * ((xx / w) * 0.6 + (yy / h) * 0.4)  # a shadow across the page
    rng = np.random.default_rng(48)
    noisy = pixels * 0.92 * light[..., None] + rng.normal(0, 6, pixels.shape)
    picture = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    return _encoded(picture, "JPEG", quality=60)


def scanned_at(sections: Sequence[Section], dpi: int) -> bytes:
    """One page scanned at ``dpi`` (a PNG)."""
    return _encoded(_page(sections, dpi=dpi))
