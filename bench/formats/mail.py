"""Mail and e-books for the format benchmark and the tests (issue #48 §1): a mail whose first
passage is its body and the rest its attachments (``.eml``; Outlook's ``.msg`` through
``bench.formats.msg``), and an ``.epub`` of a chapter per passage."""

from __future__ import annotations

import io
from collections.abc import Sequence
from xml.sax.saxutils import escape

Section = tuple[str, str]


def eml(sections: Sequence[Section]) -> bytes:
    """A mail (RFC 5322): the first passage its body, the rest a Word attachment, one passage
    again as a spreadsheet attachment (rows that must name their columns)."""
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = sections[0][0]
    message["From"] = "张伟 <zhang.wei@example.com>"
    message["To"] = "李娜 <li.na@example.com>"
    message["Date"] = "Mon, 02 Mar 2026 09:30:00 +0800"
    message.set_content(sections[0][1])
    office = "application/vnd.openxmlformats-officedocument"
    for name, data, kind in _attached(sections):
        message.add_attachment(data, *f"{office}.{kind}".split("/"), filename=name)
    return message.as_bytes()


def _attached(sections: Sequence[Section]) -> list[tuple[str, bytes, str]]:
    from bench.formats import render

    rest = list(sections[1:])
    out = []
    if rest:
        out.append(("附件正文.docx", render.docx(rest[:-1] or rest), "wordprocessingml.document"))
    if len(rest) > 1:
        out.append(("附件表格.xlsx", render.xlsx(rest[-1:]), "spreadsheetml.sheet"))
    return out


def outlook(sections: Sequence[Section]) -> bytes:
    """The same mail as Outlook's ``.msg`` (bench.formats.msg)."""
    from bench.formats.msg import msg

    files = [(name, data) for name, data, _ in _attached(sections)]
    return msg(sections[0][0], sections[0][1], ("张伟", "zhang.wei@example.com"),
               [("李娜", "li.na@example.com")], files)  # fmt: skip


def epub(sections: Sequence[Section]) -> bytes:
    """An e-book: a chapter (XHTML) per passage, in the order of the package's spine."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        items, spine = [], []
        # Written in reverse: the spine, not the manifest or the file names, gives the order.
        for i, (heading, text) in reversed(list(enumerate(sections))):
            book.writestr(
                f"OEBPS/c{i:03d}.xhtml",
                f'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>{escape(heading)}</h1>'
                f"<p>{escape(text)}</p></body></html>",
            )
            items.append(
                f'<item id="c{i}" href="c{i:03d}.xhtml" media-type="application/xhtml+xml"/>'
            )
        spine = [f'<itemref idref="c{i}"/>' for i in range(len(sections))]
        book.writestr(
            "OEBPS/book.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{escape(sections[0][0])}</dc:title></metadata>"
            f"<manifest>{''.join(items)}</manifest><spine>{''.join(spine)}</spine></package>",
        )
    return buf.getvalue()
