"""The tool's OpenAPI document has every description and summary in Chinese too: a field added
to the models without its Chinese fails here."""

from __future__ import annotations

import re

from retrieval_svc.tool_openapi import tool_openapi
from retrieval_svc.tool_words import ZH, english_texts

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_text_of_the_tool_document_has_its_chinese() -> None:
    texts = english_texts(tool_openapi("http://svc"))
    assert [t for t in texts if t not in ZH] == []
    assert all(CJK.search(ZH[t]) for t in texts)
    assert not set(ZH) - set(texts), "rows no text uses any more"


def test_the_chinese_document_is_the_english_one_in_other_words() -> None:
    english, chinese = tool_openapi("http://svc"), tool_openapi("http://svc", "zh")
    assert english_texts(chinese) == [ZH[t] for t in english_texts(english)]
    assert chinese["paths"].keys() == english["paths"].keys()
    assert chinese["servers"] == english["servers"]
