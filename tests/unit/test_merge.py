"""The merge (design.md §9) against the customer's code node: its tables are the test cases."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_svc.merge import (
    ShapeError,
    extract_web_items,
    merge,
    numbered_output,
    rag_from_dify,
    rag_items,
    site_host,
    web_chunks,
    web_subtitle,
)
from tests.support import SEED_FIELDS
from tests.support.fake_provider import BAIDU_OK, BOCHA_OK, TAVILY_OK

DATASET = "测试知识库20260610"


def rag_item(
    content: str, score: float, title: str = "", name: str = "", url: str = "", position: int = 1
) -> dict[str, Any]:
    """A result of Dify's knowledge-retrieval node (seed §3.2.1)."""
    return {
        "content": content,
        "metadata": {
            "score": score,
            "dataset_name": DATASET,
            "segment_position": position,
            "doc_metadata": {
                "document_name": name,
                "document_title": title,
                "source_file_url": url,
            },
        },
    }


@pytest.mark.parametrize(
    ("site_name", "date", "url", "expected"),
    [
        # Seed §3.6, the subtitle fallback table, row by row.
        pytest.param(
            "知乎", "2025-08-12", "https://www.zhihu.com/q/1", "知乎 · 2025-08-12", id="bocha-full"
        ),
        pytest.param(
            "",
            "2025-08-12",
            "https://www.zhihu.com/q/1",
            "zhihu.com · 2025-08-12",
            id="tavily-no-site",
        ),
        pytest.param("知乎", "", "https://www.zhihu.com/q/1", "知乎", id="baidu-no-date"),
        pytest.param("", "", "https://example.com/x", "example.com", id="bare-url"),
        pytest.param("", "", "", "", id="nothing"),
        pytest.param("", "2025-08-12", "", "2025-08-12", id="date-only"),
    ],
)
def test_subtitle_fallback(site_name: str, date: str, url: str, expected: str) -> None:
    assert web_subtitle(site_name, site_host(url), date) == expected
    chunk = merge(
        [], [{"content": "x", "site_name": site_name, "published_date": date, "url": url}], 5
    )
    assert chunk[0].display_subtitle == expected


def test_seed_output_example() -> None:
    """Seed §3.7: two knowledge-base chunks and one web chunk."""
    rag = rag_from_dify(
        [
            rag_item(
                "云巡 9 巡检端说明书", 0.65, title="云巡9巡检端说明书", name="云巡-巡检端说明书.md"
            ),
            rag_item(
                "巡更人员执行巡检计划时...",
                0.73,
                title="巡更操作指南 v2.1",
                url="oss://kb-raw/2026/06/巡更.pdf",
            ),
        ]
    )
    web = [
        {
            "title": "物业巡检流程标准 - 知乎",
            "url": "https://www.zhihu.com/question/123/answer/456",
            "snippet": "物业巡检一般分为日常巡检、专项巡检、应急巡检三类...",
            "site_name": "知乎",
            "published_date": "2025-08-12",
            "score": 0.68,
        }
    ]
    out = numbered_output(merge(rag, web, 2))
    assert out["formatted_chunks"] == (
        "[C:1]\n巡更人员执行巡检计划时...\n\n[C:2]\n云巡 9 巡检端说明书\n\n"
        "[C:3]\n物业巡检一般分为日常巡检、专项巡检、应急巡检三类..."
    )
    assert out["chunk_count"] == 3
    first, second, third = out["chunk_metadata"]
    assert {
        k: first[k]
        for k in (
            "id",
            "source_type",
            "document_title",
            "dataset_name",
            "score",
            "source_file_url",
            "display_subtitle",
        )
    } == {
        "id": "1",
        "source_type": "rag",
        "document_title": "巡更操作指南 v2.1",
        "dataset_name": DATASET,
        "score": 0.73,
        "source_file_url": "oss://kb-raw/2026/06/巡更.pdf",
        "display_subtitle": DATASET,
    }
    assert (second["id"], second["document_title"], second["score"]) == (
        "2",
        "云巡9巡检端说明书",
        0.65,
    )
    assert {
        k: third[k]
        for k in (
            "id",
            "source_type",
            "document_title",
            "site_name",
            "url",
            "score",
            "published_date",
            "display_subtitle",
        )
    } == {
        "id": "3",
        "source_type": "web",
        "document_title": "物业巡检流程标准 - 知乎",
        "site_name": "知乎",
        "url": "https://www.zhihu.com/question/123/answer/456",
        "score": 0.68,
        "published_date": "2025-08-12",
        "display_subtitle": "知乎 · 2025-08-12",
    }
    assert third["site_host"] == "zhihu.com" and third["document_name"] == third["url"]


def test_chunk_fields_are_the_code_nodes() -> None:
    out = numbered_output(merge(rag_from_dify([rag_item("正文", 0.5)]), [{"content": "w"}], 1))
    expected = SEED_FIELDS
    for chunk in out["chunk_metadata"]:
        assert set(chunk) == expected


def test_rag_normalisation() -> None:
    (chunk,) = rag_from_dify(
        [
            {
                "content": "  正文  ",
                "metadata": {
                    "score": None,
                    "document_name": "a.md",
                    "dataset_name": "库",
                    "segment_position": "3",
                },
            },
            {"content": "   ", "metadata": {}},
            {"content": None},
            "not a dict",
        ]
    )
    assert chunk.content == "正文"
    assert chunk.document_title == "a.md"  # no title → document_name (from metadata)
    assert (chunk.score, chunk.segment_position, chunk.display_subtitle) == (0.0, 3, "库")


def test_web_normalisation_and_limit() -> None:
    items = [
        {"content": "", "snippet": "", "url": "https://a"},  # counts against the limit, then drops
        {
            "snippet": "  摘要 ",
            "url": "https://www.b.com/x",
            "website": "B站",
            "date": "2025-04-27 18:02:00",
            "authority_score": 0.4,
        },
        {"content": "third", "url": "https://c"},
    ]
    chunks = merge([], items, 2)
    assert len(chunks) == 1
    (chunk,) = chunks
    assert (chunk.content, chunk.site_name, chunk.site_host) == ("摘要", "B站", "b.com")
    assert (chunk.published_date, chunk.score) == ("2025-04-27", 0.4)
    assert chunk.display_subtitle == "B站 · 2025-04-27"


def test_rag_first_then_score_and_stable_ties() -> None:
    rag = rag_from_dify([rag_item("r-low", 0.1), rag_item("r-a", 0.5), rag_item("r-b", 0.5)])
    web = [{"content": "w-high", "score": 0.99}, {"content": "w-low", "score": 0.2}]
    chunks = merge(rag, web, 5)
    assert [c.content for c in chunks] == ["r-a", "r-b", "r-low", "w-high", "w-low"]
    assert [c.id for c in chunks] == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param([{"references": [{"content": "x"}], "request_id": "r"}], id="baidu-node"),
        pytest.param({"json": [{"references": [{"content": "x"}]}]}, id="tool-envelope"),
        pytest.param([{"content": "x"}], id="plain-list"),
    ],
)
def test_web_envelopes(raw: Any) -> None:
    assert [i["content"] for i in extract_web_items(raw)] == ["x"]


@pytest.mark.parametrize("raw", [None, [], {}, ""])
def test_no_web_input_is_empty(raw: Any) -> None:
    assert extract_web_items(raw) == []


BOCHA_ITEMS = BOCHA_OK["data"]["webPages"]["value"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(BOCHA_OK, id="bocha-response"),
        pytest.param(BOCHA_OK["data"], id="bocha-data"),
        pytest.param(BOCHA_ITEMS, id="bocha-items"),
        pytest.param({"json": [BOCHA_OK]}, id="bocha-in-tool-envelope"),
    ],
)
def test_bocha_shapes(raw: Any) -> None:
    chunks = web_chunks(extract_web_items(raw), 5)
    assert [c.document_title for c in chunks] == ["物业巡检流程标准 - 知乎", "巡检制度范本"]
    first, second = chunks
    assert first.content == "物业巡检一般分为日常巡检、专项巡检、应急巡检三类。"  # summary
    assert first.display_subtitle == "知乎 · 2025-08-12"
    assert second.content.startswith("巡检制度范本")  # empty summary: the snippet
    assert second.display_subtitle == "example.com · 2024-12-01"  # host, dateLastCrawled


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(TAVILY_OK, id="tavily-response"),
        pytest.param(TAVILY_OK["results"], id="tavily-list"),
        pytest.param({"json": [TAVILY_OK]}, id="tavily-in-tool-envelope"),
        pytest.param({"json": TAVILY_OK["results"]}, id="plain-items-in-envelope"),
    ],
)
def test_tavily_shapes(raw: Any) -> None:
    items = extract_web_items(raw)
    assert [i["url"] for i in items] == [r["url"] for r in TAVILY_OK["results"]]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(BAIDU_OK, id="baidu-response"),
        pytest.param([BAIDU_OK], id="baidu-node"),
        pytest.param({"json": [BAIDU_OK]}, id="baidu-in-tool-envelope"),
    ],
)
def test_baidu_shapes(raw: Any) -> None:
    assert [c.site_name for c in web_chunks(extract_web_items(raw), 5)] == ["百度百科", ""]


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param("text", "web_chunks", id="text"),
        pytest.param(5, "web_chunks", id="number"),
        pytest.param({"json": "x"}, "web_chunks.json", id="envelope-of-text"),
        pytest.param({"hits": []}, "web_chunks", id="unknown-object"),
        pytest.param({"results": "x"}, "web_chunks.results", id="results-not-a-list"),
        pytest.param([{"content": "a"}, "b"], "web_chunks[1]", id="item-not-an-object"),
        pytest.param(
            {"data": {"webPages": {"value": 3}}}, "web_chunks.data.webPages.value", id="bocha-bad"
        ),
    ],
)
def test_unknown_web_shapes_are_errors_with_a_path(raw: Any, path: str) -> None:
    with pytest.raises(ShapeError) as err:
        extract_web_items(raw)
    assert err.value.path == path


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param("oops", "rag_chunks", id="text"),
        pytest.param({"records": []}, "rag_chunks", id="unknown-object"),
        pytest.param([{"content": "a"}, 7], "rag_chunks[1]", id="item-not-an-object"),
    ],
)
def test_unknown_rag_shapes_are_errors_with_a_path(raw: Any, path: str) -> None:
    with pytest.raises(ShapeError) as err:
        rag_items(raw)
    assert err.value.path == path
    assert rag_items({"result": [{"content": "a"}]}) == [{"content": "a"}]  # the node's output


def test_nothing_in_nothing_out() -> None:
    assert numbered_output(merge([], [], 2)) == {
        "formatted_chunks": "",
        "chunk_count": 0,
        "chunk_metadata": [],
    }
