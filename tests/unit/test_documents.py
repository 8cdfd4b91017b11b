"""From a source object to chunk documents (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from indexer.documents import DocumentError, SourceObject, build_chunks, split_front_matter

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def obj(text: str, *layers: dict[str, Any], name: str = "docs/巡检.md") -> SourceObject:
    front, text = split_front_matter(text)
    return SourceObject(
        uri=f"oss://kb/{name}",
        identity=f"oss://kb/{name}",
        name=name,
        text=text,
        etag="e1",
        front_matter=front,
        metadata_layers=layers,
    )


def build(o: SourceObject) -> list[dict[str, Any]]:
    return build_chunks(o, knowledge_id="kb", dataset_name="测试库", now=NOW)


def test_front_matter_is_parsed_and_removed() -> None:
    meta, body = split_front_matter("---\ntitle: 甲\ncategory: 巡检\n---\n正文\n")
    assert meta == {"title": "甲", "category": "巡检"}
    assert body == "正文\n"


def test_no_front_matter() -> None:
    assert split_front_matter("# 标题\n") == ({}, "# 标题\n")


@pytest.mark.parametrize("text", ["---\ntitle: [\n---\nx", "---\n- a\n---\nx", "---\ntitle: a\n"])
def test_bad_front_matter_is_a_document_error(text: str) -> None:
    with pytest.raises(DocumentError):
        split_front_matter(text)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        pytest.param("---\ntitle: 前言标题\n---\n# 一级标题\n正文", "前言标题", id="front-matter"),
        pytest.param("---\ndocument_title: 文档标题\n---\n正文", "文档标题", id="document-title"),
        pytest.param("正文在前\n\n# 一级标题\n更多", "一级标题", id="first-heading"),
        pytest.param("只有正文", "巡检", id="file-stem"),
    ],
)
def test_title_fallback(text: str, title: str) -> None:
    assert build(obj(text))[0]["document_title"] == title


def test_fields_and_stable_ids() -> None:
    docs = build(obj("# 标题\n\n第一段。\n\n# 第二\n\n第二段。"))
    assert [d["segment_position"] for d in docs] == [1, 2]
    assert docs[0]["chunk_id"].startswith(docs[0]["document_id"])
    assert docs[0]["source_file_url"] == "oss://kb/docs/巡检.md"
    assert docs[0]["dataset_name"] == "测试库"
    assert docs[0]["document_name"] == "docs/巡检.md"
    again = build(obj("# 标题\n\n第一段。\n\n# 第二\n\n第二段。"))
    assert [d["chunk_id"] for d in again] == [d["chunk_id"] for d in docs]
    other = build(obj("正文", name="docs/other.md"))
    assert other[0]["document_id"] != docs[0]["document_id"]


@pytest.mark.parametrize(
    ("layers", "roles"),
    [
        pytest.param(({"access_roles": ["a", "b"]},), ["a", "b"], id="list"),
        pytest.param(({"access_roles": '["a","b"]'},), ["a", "b"], id="json-text"),
        pytest.param(({"access_roles": "a,b"},), ["a", "b"], id="comma-text"),
        pytest.param(({"access_roles": None},), None, id="null"),
        pytest.param(({"access_roles": ""},), None, id="empty-text"),
        pytest.param(({"access_roles": "[]"},), None, id="empty-json"),
        pytest.param((), None, id="absent"),
        pytest.param(({"access_roles": ["a"]}, {"access_roles": ["b"]}), ["b"], id="later-wins"),
    ],
)
def test_access_roles_forms(layers: tuple[dict[str, Any], ...], roles: list[str] | None) -> None:
    docs = build(obj("正文", *layers))
    assert docs[0].get("access_roles") == roles


def test_unreadable_acl_refuses_the_document() -> None:
    with pytest.raises(DocumentError, match="access_roles"):
        build(obj("正文", {"access_roles": '["a",'}))


def test_front_matter_acl_can_be_overridden_by_sidecar() -> None:
    docs = build(obj("---\naccess_roles: [a]\ncategory: x\n---\n正文", {"category": "y"}))
    assert docs[0]["access_roles"] == ["a"]
    assert docs[0]["metadata"] == {"category": "y", "access_roles_from": "front matter"}


def test_custom_metadata_goes_under_metadata() -> None:
    docs = build(obj("---\ntitle: t\ncategory: 巡检\nyear: 2026\n---\n正文"))
    assert docs[0]["metadata"] == {"category": "巡检", "year": 2026}


def test_empty_document_is_an_error() -> None:
    with pytest.raises(DocumentError, match="no text"):
        build(obj("---\ntitle: t\n---\n\n"))
