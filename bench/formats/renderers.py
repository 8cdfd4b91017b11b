"""Every format the format benchmark renders, by name: its file suffix and its renderer
(``render`` for documents, pages and pictures, ``mail`` for mail and e-books)."""

from __future__ import annotations

from bench.formats import mail, render

RENDERERS = {
    "markdown": (".md", render.markdown),
    "pdf": (".pdf", render.pdf),
    "pdf-2col": (".pdf", lambda s: render.pdf(s, columns=2)),
    "pdf-table": (".pdf", lambda s: render.pdf(s, table=True)),
    "docx": (".docx", render.docx),
    "pptx": (".pptx", render.pptx),
    "xlsx": (".xlsx", render.xlsx),
    "csv": (".csv", render.delimited),
    "pdf-scanned": (".pdf", render.scanned_pdf),
    "eml": (".eml", mail.eml),
    "msg": (".msg", mail.outlook),
    "epub": (".epub", mail.epub),
    "png": (".png", render.png),
    # Scans as they are (issue #48 §3): one page each, one passage.
    "scan-300dpi": (".png", lambda s: render.scanned_at(s, 300)),
    "scan-rot90": (".png", lambda s: render.rotated(s, 90)),
    "scan-rot180": (".png", lambda s: render.rotated(s, 180)),
    "scan-rot270": (".png", lambda s: render.rotated(s, 270)),
    # The same pages inside image-only PDFs: a sideways scan, and an upright one turned by
    # its page's /Rotate (issue #56).
    "pdf-rot90": (".pdf", lambda s: render.rotated_pdf(s, 90)),
    "pdf-rot180": (".pdf", lambda s: render.rotated_pdf(s, 180)),
    "pdf-rot270": (".pdf", lambda s: render.rotated_pdf(s, 270)),
    "pdf-rotate90": (".pdf", lambda s: render.rotated_pdf(s, 90, "page")),
    "pdf-rotate270": (".pdf", lambda s: render.rotated_pdf(s, 270, "page")),
    "scan-skew3": (".png", render.skewed),
    "scan-seal": (".png", render.sealed),
    "photo": (".jpg", render.photographed),
}
# One page each: one passage.
IMAGES = {"png", "scan-300dpi", "scan-rot90", "scan-rot180", "scan-rot270", "scan-skew3",
          "scan-seal", "photo", "pdf-rot90", "pdf-rot180", "pdf-rot270", "pdf-rotate90",
          "pdf-rotate270"}  # fmt: skip
