"""Parsing every supported format (pure)."""

from __future__ import annotations

import pytest

from indexer.documents import DocumentError
from indexer.parsers import parse, supported
from tests.support import doc_factory


def test_markdown_front_matter_and_body() -> None:
    parsed = parse("a.md", doc_factory.markdown("title: 标题\naccess_roles: [a]", "# 一\n正文"))
    assert parsed.front_matter == {"title": "标题", "access_roles": ["a"]}
    assert parsed.text == "# 一\n正文"


def test_text_utf8_bom_and_gb18030() -> None:
    assert parse("a.txt", "\ufeff巡检".encode()).text == "巡检"
    assert parse("b.txt", "巡检记录".encode("gb18030")).text == "巡检记录"


def test_binary_garbage_text_is_an_error() -> None:
    with pytest.raises(DocumentError):
        parse("c.txt", b"\xff\xfe\xfa\x00\x81")


def test_html_keeps_headings_and_drops_noise() -> None:
    page = doc_factory.html(
        "会议室指南", [("预约", "通过小程序预约。"), ("退订", "提前一小时退订。")]
    )
    text = parse("p.html", page).text
    assert text.splitlines()[0] == "# 会议室指南"
    assert "## 预约" in text and "通过小程序预约。" in text
    for noise in ("secret", "首页", "版权所有", "color:red"):
        assert noise not in text


def test_pdf_chinese_text() -> None:
    text = parse("x.pdf", doc_factory.pdf(["消防控制室值班制度", "值班人员每日检查控制器。"])).text
    assert "消防控制室值班制度" in text and "值班人员每日检查控制器。" in text


@pytest.mark.parametrize("data", [b"%PDF-1.7 broken", b"not a pdf at all", b""])
def test_corrupt_pdf_is_a_document_error(data: bytes) -> None:
    with pytest.raises(DocumentError, match="PDF"):
        parse("bad.pdf", data)


def test_docx_headings_and_tables() -> None:
    data = doc_factory.docx(
        "电梯维保规程", [("周期", "每15日维保一次。")], [["项目", "周期"], ["润滑", "每月"]]
    )
    text = parse("m.docx", data).text
    assert text.splitlines()[0] == "# 电梯维保规程"
    assert "# 周期" in text and "每15日维保一次。" in text
    assert "项目: 润滑 · 周期: 每月" in text  # a row names its columns (issue #34 §3)


def test_corrupt_docx_is_a_document_error() -> None:
    with pytest.raises(DocumentError, match="DOCX"):
        parse("bad.docx", b"PK\x03\x04 not really a zip")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a.md", True),
        ("a.MD", True),
        ("b.txt", True),
        ("c.html", True),
        ("d.pdf", True),
        ("e.docx", True),
        ("f.doc", True),  # read through LibreOffice
        ("g.png", True),
        ("g.vsdx", False),
        ("h", False),
    ],
)
def test_supported(name: str, ok: bool) -> None:
    assert supported(name) is ok
