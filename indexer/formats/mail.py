"""Mail kept in shares: ``.eml`` (RFC 5322, Python's ``email``) and Outlook's ``.msg``
(``extract-msg``: the OLE container Outlook writes), and e-books (``.epub``: a zip of XHTML
chapters in the order its package file gives).

A mail is one document: its subject the title, sender, recipients and date as metadata
(``mail_from``, ``mail_to``, ``mail_date``), its body (the plain text, else the HTML's text),
then each attachment the indexer can read as a section of its own (``# 附件：报价单.xlsx``,
its headings one level down, its chunks marked ``attachment``), read by that format's reader
under the same budget. An attachment is part of the mail it came in — whoever may read the
mail may read it, and a search finds it with the mail's date and sender — so it is not a
document of its own; one that is not read is named in the text, never dropped in silence. A
mail attached to a mail is read one level down, not further.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import PurePosixPath
from typing import Any
from xml.etree import ElementTree

from indexer.documents import DocumentError
from indexer.formats.base import Parsed, Part, Reading

ATTACHMENT = "附件"
# (name, data, reading) → what a reader made of it, None for a type no reader takes
# (indexer.parsers gives it: this module is one of the readers it maps).
Reader = Callable[[str, bytes, Reading], Parsed | None]


def _people(values: Iterable[str]) -> list[str]:
    return [f"{name} <{addr}>" if name else addr for name, addr in getaddresses(list(values))]


def _html_text(html: bytes, reading: Reading) -> str:
    from indexer.formats.text import parse_html

    return parse_html(html, reading).text


def _deeper(text: str) -> str:
    """An attachment's headings one level down, under its own ``# 附件：name``."""
    return "\n".join(
        f"#{line}" if line.startswith("#") and not line.startswith("######") else line
        for line in text.splitlines()
    )


def _attachments(
    found: list[tuple[str, bytes | Parsed]], reading: Reading, read: Reader | None, depth: int
) -> list[Part]:
    """Each attachment's text as parts marked with its name; the names of those no reader
    takes, and why one that should be read was not, on a line of their own."""
    parts: list[Part] = []
    others: list[str] = []
    for name, data in found:
        heading = f"# {ATTACHMENT}：{name}"
        nested = PurePosixPath(name).suffix.lower() in (".eml", ".msg")
        if isinstance(data, Parsed):  # (a mail attached as an item: read already)
            if data.text.strip():
                parts.append(Part(f"{heading}\n\n{_deeper(data.text)}", {"attachment": name}))
            continue
        if read is None or (nested and depth) or not data:
            others.append(name)
            continue
        try:
            reading.budget.check_bytes(len(data))
            inner = read(name, data, reading)
        except DocumentError as exc:
            parts.append(Part(f"{heading}\n\n（未能读取：{exc}）", {"attachment": name}))
            continue
        if inner is None:
            others.append(name)
        elif inner.text.strip():
            parts.append(Part(f"{heading}\n\n{_deeper(inner.text)}", {"attachment": name}))
    if others:
        parts.append(Part(f"{ATTACHMENT}（未读取其内容）：{'、'.join(others)}"))
    return parts


def _mail(
    subject: str,
    people: dict[str, list[str]],
    sent: Any,
    body: str,
    found: list[tuple[str, bytes | Parsed]],
    reading: Reading,
    read: Reader | None,
    depth: int,
    fmt: str,
) -> Parsed:
    meta: dict[str, Any] = {}
    if people.get("from"):
        meta["mail_from"] = people["from"]
    recipients = people.get("to", []) + people.get("cc", [])
    if recipients:
        meta["mail_to"] = recipients
    if sent is not None:
        meta["mail_date"] = sent.isoformat()
    lines = [f"发件人：{', '.join(people.get('from', []))}"] if people.get("from") else []
    if recipients:
        lines.append(f"收件人：{', '.join(recipients)}")
    head = "\n".join(lines)
    title = f"# {subject.strip()}" if subject.strip() else ""  # (searched like a Word title)
    parts = [Part("\n\n".join(x for x in (title, head, body.strip()) if x))]
    parts += _attachments(found, reading, read, depth)
    if not any(p.text.strip() for p in parts):
        raise DocumentError("the mail has no text and no attachment that can be read")
    info = {"format": fmt, "attachments": len(found)}
    return Parsed(tuple(parts), front_matter=meta, title=subject.strip() or None, info=info)


def parse_eml(data: bytes, reading: Reading, read: Reader | None = None, depth: int = 0) -> Parsed:
    """An RFC 5322 mail (``.eml``)."""
    try:
        message = BytesParser(policy=policy.default).parsebytes(data)
    except Exception as exc:  # the parser is lenient; anything it raises is a broken file
        raise DocumentError(f"mail cannot be read: {type(exc).__name__}: {exc}") from exc
    assert isinstance(message, EmailMessage)
    body_part = message.get_body(preferencelist=("plain", "html"))
    body = ""
    if body_part is not None:
        content = body_part.get_content()
        if body_part.get_content_subtype() == "html":
            raw = content.encode() if isinstance(content, str) else content
            body = _html_text(raw, reading)
        else:
            body = str(content)
    found: list[tuple[str, bytes | Parsed]] = []
    for part in message.iter_attachments():
        name = part.get_filename() or (
            "mail.eml" if part.get_content_type() == "message/rfc822" else ""
        )
        payload = part.get_payload(decode=True)
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list) and inner and not isinstance(inner[0], str):
                payload = inner[0].as_bytes()
        if name and isinstance(payload, bytes):
            found.append((name, payload))
    try:
        sent = parsedate_to_datetime(str(message["date"])) if message["date"] else None
    except (TypeError, ValueError):
        sent = None
    people = {k: _people(message.get_all(k, [])) for k in ("from", "to", "cc")}
    return _mail(
        str(message["subject"] or ""), people, sent, body, found, reading, read, depth, "eml"
    )


def parse_msg(data: bytes, reading: Reading, read: Reader | None = None, depth: int = 0) -> Parsed:
    """An Outlook mail (``.msg``)."""
    import extract_msg

    try:
        opened = extract_msg.openMsg(data)
    except Exception as exc:  # extract-msg raises its own errors for a file it cannot read
        raise DocumentError(f"Outlook mail cannot be read: {type(exc).__name__}: {exc}") from exc
    if not isinstance(opened, extract_msg.Message):  # a contact, a task, an appointment…
        opened.close()
        raise DocumentError(
            f"Outlook mail cannot be read: the .msg holds a {type(opened).__name__}, not a mail"
        )
    try:
        return _outlook(opened, reading, read, depth)
    finally:
        opened.close()


def _outlook(message: Any, reading: Reading, read: Reader | None, depth: int) -> Parsed:
    """An opened Outlook message (a ``.msg``, or a mail attached to one as an item)."""
    import extract_msg

    body = message.body or ""
    if not body.strip() and (html := message.htmlBody):
        body = _html_text(html, reading)
    found: list[tuple[str, bytes | Parsed]] = []
    for attachment in message.attachments:
        payload = getattr(attachment, "data", None)
        name = getattr(attachment, "getFilename", lambda: None)() or ""
        if isinstance(payload, extract_msg.Message):  # an item: read one level down
            name = name or f"{payload.subject or 'mail'}.msg"
            if depth:
                found.append((name, b""))  # (named, not read: as a mail in a mail in a mail)
            else:
                found.append((name, _outlook(payload, reading, read, depth + 1)))
        elif isinstance(payload, bytes) and name:
            found.append((name, payload))
        elif name or payload is not None:  # (a link, an OLE object…: named, never dropped)
            found.append((name or type(attachment).__name__, b""))
    people = {  # (Outlook separates recipients with semicolons)
        key: _people(p for p in (value or "").split(";") if p.strip())
        for key, value in (("from", message.sender), ("to", message.to), ("cc", message.cc))
    }
    return _mail(
        message.subject or "", people, message.date, body, found, reading, read, depth, "msg"
    )


_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def parse_epub(data: bytes, reading: Reading) -> Parsed:
    """An e-book: its chapters in reading order (the package file's spine), as HTML is read."""
    from indexer.formats.office import unpacked_size

    unpacked_size(data, reading, "EPUB")
    try:
        book = zipfile.ZipFile(io.BytesIO(data))
        container = ElementTree.fromstring(book.read("META-INF/container.xml"))
        rootfile = container.find(".//c:rootfile", _NS)
        if rootfile is None:
            raise DocumentError("EPUB cannot be read: its container names no package file")
        package_path = PurePosixPath(rootfile.attrib["full-path"])
        package = ElementTree.fromstring(book.read(str(package_path)))
        items = {
            item.attrib["id"]: item.attrib["href"]
            for item in package.iterfind(".//opf:manifest/opf:item", _NS)
        }
        order = [ref.attrib["idref"] for ref in package.iterfind(".//opf:spine/opf:itemref", _NS)]
        reading.budget.check_pages(len(order), "the book has", "chapters")
        title = package.findtext(".//dc:title", default="", namespaces=_NS).strip()
        chapters = []
        for idref in order:
            href = items.get(idref)
            if href:
                path = package_path.parent / href
                chapters.append(_html_text(book.read(str(path)), reading))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError) as exc:
        raise DocumentError(f"EPUB cannot be read: {type(exc).__name__}: {exc}") from exc
    parts = tuple(Part(text) for text in chapters if text.strip())
    return Parsed(parts, title=title or None, info={"format": "epub", "pages": len(order)})
