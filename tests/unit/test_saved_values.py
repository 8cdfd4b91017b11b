"""Spreadsheets are indexed by the values their authors saved (docs/indexer.md, "Formats"):
no formula is evaluated on the way in — not by LibreOffice (which recalculates volatile
functions on every load, whatever its profile says), not by a reader. Each format that can
carry a formula holds one cell per volatile function with a saved value nobody would compute
(``INFO("osversion")`` saved as ``saved-os``…), and the text must hold those values."""

from __future__ import annotations

import datetime
import io
import platform
import zipfile
from xml.sax.saxutils import escape, quoteattr

import pytest

from indexer.parsers import parse

# (formula as OpenFormula writes it, as Excel writes it, the saved value: never what this
# machine computes, numbers with a fraction so every reader shows them alike)
CELLS = [
    ('INFO("osversion")', 'INFO("osversion")', "saved-os"),
    ('CELL("filename")', 'CELL("filename")', "saved-name"),
    ("NOW()", "NOW()", "1234.5"),
    ("RAND()", "RAND()", "0.25"),
    ("1+1", "1+1", "7.5"),  # (a stale value is still what was saved)
]


def ods_bytes() -> bytes:
    """An OpenDocument spreadsheet as LibreOffice writes one: each formula with its value."""
    rows = ["<table:table-row>" + _ods_text("what") + _ods_text("value") + "</table:table-row>"]
    for formula, _, saved in CELLS:
        number = saved.replace(".", "").isdigit()
        value = (
            f'office:value-type="float" office:value="{saved}"'
            if number
            else f'office:value-type="string" office:string-value={quoteattr(saved)}'
        )
        rows.append(
            "<table:table-row>" + _ods_text(formula)
            + f"<table:table-cell table:formula={quoteattr('of:=' + formula)} {value}>"
            f"<text:p>{escape(saved)}</text:p></table:table-cell></table:table-row>"
        )  # fmt: skip
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2">'
        '<office:body><office:spreadsheet><table:table table:name="值">'
        + "".join(rows)
        + "</table:table></office:spreadsheet></office:body></office:document-content>"
    )
    kind = "application/vnd.oasis.opendocument.spreadsheet"
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
        '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{kind}"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    return _zip({"mimetype": kind, "content.xml": content, "META-INF/manifest.xml": manifest})


def _ods_text(text: str) -> str:
    cell = '<table:table-cell office:value-type="string">'
    return f"{cell}<text:p>{escape(text)}</text:p></table:table-cell>"


def xlsx_bytes() -> bytes:
    """An Office Open XML workbook as Excel writes one: each formula (``<f>``) with the value
    it last computed (``<v>``)."""
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    rows = ['<row r="1"><c r="A1" t="inlineStr"><is><t>what</t></is></c>'
            '<c r="B1" t="inlineStr"><is><t>value</t></is></c></row>']  # fmt: skip
    for n, (_, formula, saved) in enumerate(CELLS, start=2):
        typed = "" if saved.replace(".", "").isdigit() else ' t="str"'
        rows.append(
            f'<row r="{n}"><c r="A{n}" t="inlineStr"><is><t>{escape(formula)}</t></is></c>'
            f'<c r="B{n}"{typed}><f>{escape(formula)}</f>'
            f"<v>{escape(saved)}</v></c></row>"
        )
    sheet = f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{ns}"><sheetData>'
    sheet += "".join(rows) + "</sheetData></worksheet>"
    return _zip(
        {
            "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://'
            'schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default '
            'Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.'
            'xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.'
            'sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType='
            '"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
            "</Types>",
            "_rels/.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://'
            'schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
            "xl/workbook.xml": f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{ns}" '
            f'xmlns:r="{rel}"><sheets><sheet name="值" sheetId="1" r:id="rId1"/></sheets>'
            "</workbook>",
            "xl/_rels/workbook.xml.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships '
            'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
            f'Id="rId1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
            "xl/worksheets/sheet1.xml": sheet,
        }
    )


def xls_bytes() -> bytes:
    """An Excel 97-2003 workbook with the formulas (xlwt saves them with no value computed:
    the saved value is an empty cell)."""
    import xlwt

    book = xlwt.Workbook()
    sheet = book.add_sheet("值")
    sheet.write(0, 0, "what")
    sheet.write(0, 1, "value")
    for n, (_, formula, _) in enumerate(CELLS, start=1):
        sheet.write(n, 0, formula)
        sheet.write(n, 1, xlwt.Formula(formula))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _zip(members: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return out.getvalue()


def computed_here() -> list[str]:
    """What evaluating the volatile functions on this machine would have written."""
    today = datetime.date.today()
    return [platform.release(), platform.system(), "file:///", today.isoformat(), str(today.year)]


def text_of(name: str, data: bytes) -> str:
    return "\n".join(part.text for part in parse(name, data).parts)


@pytest.mark.parametrize(
    ("name", "make"),
    [
        pytest.param("值.ods", ods_bytes, id="ods"),
        pytest.param("值.xlsx", xlsx_bytes, id="xlsx"),
        pytest.param("值.xlsm", xlsx_bytes, id="xlsm"),
        pytest.param("值.et", xlsx_bytes, id="et-open-xml"),  # (WPS writes either format)
    ],
)
def test_formulas_are_indexed_by_their_saved_values(name: str, make: object) -> None:
    assert callable(make)
    text = text_of(name, make())
    for formula, _, saved in CELLS:
        assert f"what: {formula} · value: {saved}" in text, (formula, saved, text)
    for computed in computed_here():
        assert computed not in text, (computed, text)


@pytest.mark.parametrize("name", ["值.xls", "值.et"])
def test_a_formula_saved_without_a_value_stays_empty(name: str) -> None:
    text = text_of(name, xls_bytes())
    assert 'INFO("osversion")' in text, text
    for computed in computed_here():
        assert computed not in text, (computed, text)
    assert "what: 1+1 · value: 2" not in text, text  # (never computed, so not now either)
