"""Whether a file's content is what its suffix says (issue #34 §6): a reader is never handed
a file that only borrowed its name, and the reason says what the file really is."""

from __future__ import annotations

from indexer.documents import DocumentError

ZIP = b"PK\x03\x04"
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # Compound File Binary: Office 97-2003, encrypted Office
_ENCRYPTED = "EncryptionInfo".encode("utf-16-le")

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "a PDF"),
    (ZIP, "a zip archive (an Office file or other)"),
    (OLE, "an Office 97-2003 or password-protected Office file"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
)
OOXML = _OOXML = {".docx", ".xlsx", ".xlsm", ".pptx"}
RTF = b"{\\rtf"
# Office 97-2003 (OLE) or Open XML / OpenDocument (zip) inside, or RTF: read through LibreOffice,
# or (spreadsheets: .et, .ods) by formats.sheets.
_CONVERTED = {".doc", ".ppt", ".wps", ".et", ".dps", ".odt", ".ods", ".odp", ".rtf"}
_TEXT = {".md", ".markdown", ".txt", ".html", ".htm", ".csv", ".tsv"}


def what_it_is(data: bytes) -> str | None:
    """The kind of file its first bytes say, or None for none we know (text, for one)."""
    head = data[:8]
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    if data[:1024].lstrip().startswith(b"%PDF"):
        return "a PDF"
    return None


def legacy_office(data: bytes) -> bool:
    """Whether ``data`` is an Office 97-2003 file that is not password-protected."""
    return data.startswith(OLE) and _ENCRYPTED not in data


def check(suffix: str, data: bytes) -> None:
    """Raise DocumentError when ``data`` is not a ``suffix`` file; the reason names what it
    is and what to do."""
    kind = what_it_is(data)
    if suffix in _OOXML:
        if data.startswith(OLE):
            if _ENCRYPTED in data:
                raise DocumentError(
                    f"the {suffix} file is password-protected (encrypted): remove the password "
                    "and save it again to index it"
                )
            raise DocumentError(
                f"named {suffix} but it is an Office 97-2003 file: save it as {suffix}"
            )
        if not data.startswith(ZIP):
            raise DocumentError(f"named {suffix} but it is {kind or 'not an Office file'}")
    elif suffix == ".pdf":
        if kind != "a PDF":
            raise DocumentError(f"named .pdf but it is {kind or 'not a PDF'}")
    elif suffix == ".xls":
        if not data.startswith((OLE, ZIP)):
            raise DocumentError(f"named {suffix} but it is {kind or 'not an Office 97-2003 file'}")
    elif suffix in _CONVERTED:
        if data.startswith(OLE) and _ENCRYPTED in data:
            raise DocumentError(
                f"the {suffix} file is password-protected (encrypted): remove the password "
                "and save it again to index it"
            )
        if not data.startswith((OLE, ZIP, RTF)):
            raise DocumentError(f"named {suffix} but it is {kind or 'not an office document'}")
    elif suffix in _TEXT:
        if kind is not None:
            raise DocumentError(f"named {suffix} but it is {kind}")
        if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise DocumentError(f"named {suffix} but its content is binary, not text")
