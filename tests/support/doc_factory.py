"""Builders for Chinese test documents in every format the indexer reads."""

from __future__ import annotations

import io

DOCX_TITLE = "电梯维保规程"


def pdf(lines: list[str]) -> bytes:
    """A PDF with Chinese text (reportlab's built-in CID font: no font file needed)."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    buf = io.BytesIO()
    page = canvas.Canvas(buf)
    page.setFont("STSong-Light", 12)
    y = 780
    for line in lines:
        page.drawString(60, y, line)
        y -= 24
    page.showPage()
    page.save()
    return buf.getvalue()


def docx(
    title: str, sections: list[tuple[str, str]], table: list[list[str]] | None = None
) -> bytes:
    """A DOCX with a Title, Heading 1 sections and an optional table."""
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading(title, level=0)
    for heading, body in sections:
        document.add_heading(heading, level=1)
        document.add_paragraph(body)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def html(title: str, sections: list[tuple[str, str]]) -> bytes:
    """An HTML page with navigation and script noise around the content."""
    body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in sections)
    return (
        f"<!doctype html><html><head><title>{title}</title><style>p{{color:red}}</style>"
        f"<script>var secret = 'not content';</script></head><body>"
        f"<nav><a href='/'>首页</a></nav><h1>{title}</h1>{body}"
        f"<footer>版权所有</footer></body></html>"
    ).encode()


def markdown(front_matter: str, body: str) -> bytes:
    return (f"---\n{front_matter}\n---\n{body}" if front_matter else body).encode()
