"""The Dify tool's OpenAPI document in Chinese: each description and summary the English
document holds (``tool_openapi``, from the models' field descriptions), said for the LLM and the
administrator who read it in Dify's tool editor. ``tests/unit/test_tool_openapi_words.py`` holds
every English text of the document to a row here, so a new field cannot stay English."""

from __future__ import annotations

from typing import Any

ZH: dict[str, str] = {
    "Searches the company knowledge base (with the user's permissions) and, optionally, the web; returns numbered passages to cite as [C:N].": "检索公司知识库（按用户的权限），也可同时检索网络；返回带编号的段落，引用时写作 [C:N]。",  # noqa: E501
    "Search the knowledge base and the web for passages to cite": "在知识库和网络中检索可引用的段落",  # noqa: E501
    "Use this to answer questions about the building, its rules, equipment, procedures and services, or general knowledge when web is true. Returns formatted_chunks: passages numbered [C:1], [C:2], …; cite a passage with its marker only when you use its content.": "用它回答关于楼宇、规章、设备、流程和服务的问题；web 为 true 时也可回答一般知识问题。返回 formatted_chunks：编号为 [C:1]、[C:2]……的段落；只有用到某段内容时，才用它的标记引用它。",  # noqa: E501
    "The user's question, as a search query.": "用户的问题，作为检索词。",
    "Knowledge base ids, comma-separated (or a JSON array); at most 50.": "知识库 ID，逗号分隔（或 JSON 数组）；最多 50 个。",  # noqa: E501
    "The end user's id. Set by the application, never by the model.": "最终用户的 ID。由应用设置，绝不由模型设置。",  # noqa: E501
    "The end user's roles, comma-separated (trusted keys only). Set by the application, never by the model.": "最终用户的角色，逗号分隔（仅限 trusted 密钥）。由应用设置，绝不由模型设置。",  # noqa: E501
    "Principal token: signed by your backend, or the user's OIDC token. Set by the application, never by the model.": "主体令牌：由你的后端签发，或用户的 OIDC 令牌。由应用设置，绝不由模型设置。",  # noqa: E501
    "Optional filter tree as JSON text.": "可选的过滤树，JSON 文本。",
    "How many knowledge-base passages.": "返回多少条知识库段落。",
    "Only passages scoring at least this (0 to 1).": "只返回得分不低于此值的段落（0 到 1）。",
    "Also search the web.": "同时检索网络。",
    "How many web passages at most.": "最多返回多少条网络段落。",
    "Retrieval mode: hybrid (keywords and meaning), bm25 (keywords only) or vector (meaning only). Leave empty for the configured default.": "检索模式：hybrid（关键词加语义）、bm25（只用关键词）或 vector（只用语义）。留空则用配置的默认值。",  # noqa: E501
    "``POST /v1/tools/unified-search``: flat, string-friendly parameters for a Dify tool.": "``POST /v1/tools/unified-search``：给 Dify 工具用的扁平、便于用字符串填写的参数。",  # noqa: E501
    "Numbered passages.": "带编号的段落。",
    "Numbered context for the LLM: [C:1]\\n…": "给 LLM 的带编号上下文：[C:1]\\n…",
    "The number N of its [C:N] marker.": "它的 [C:N] 标记中的编号 N。",
    "One numbered chunk of the merged context; ``id`` is assigned when numbering.": "合并后上下文中的一个带编号分段；``id`` 在编号时分配。",  # noqa: E501
    "UnifiedChunk objects, by id.": "UnifiedChunk 对象，按 id 排列。",
    "The retrieval mode that ran.": "实际运行的检索模式。",
    "disabled when web was not asked for, or no provider is configured": "没有要求网络检索、或没有配置提供方时为 disabled",  # noqa: E501
    "Why, when web was asked for and gave nothing.": "要求了网络检索却没有结果时，说明原因。",
    "What web search did for a tool call.": "网络检索在一次工具调用中做了什么。",
    "How the search ran. meta.web.detail says why no web passages came back when web was asked for (for example: no web provider is configured).": "检索是如何运行的。要求了网络检索却没有网络段落时，meta.web.detail 说明原因（例如：没有配置网络检索提供方）。",  # noqa: E501
    "``POST /v1/tools/unified-search``: the code node's output, plus ``meta``.": "``POST /v1/tools/unified-search``：代码节点的输出，另加 ``meta``。",  # noqa: E501
    "Renumber [C:N] citations in an answer": "为回答中的 [C:N] 引用重新编号",
    "Renumbers the [C:N] markers of an answer 1, 2, 3… in order of first appearance and lists the cited passages.": "把回答中的 [C:N] 标记按首次出现的顺序重新编号为 1、2、3……，并列出被引用的段落。",  # noqa: E501
    "``POST /v1/citations/resolve``.": "``POST /v1/citations/resolve`` 的请求体。",
    "The renumbered answer and its citations.": "重新编号后的回答及其引用。",
    "An error.": "一个错误。",
}  # fmt: skip

TEXT_KEYS = ("description", "summary")


def english_texts(document: Any) -> list[str]:
    """Every description and summary in ``document`` (an OpenAPI document), in order."""
    found: list[str] = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key in TEXT_KEYS and isinstance(value, str):
                found.append(value)
            else:
                found.extend(english_texts(value))
    elif isinstance(document, list):
        for value in document:
            found.extend(english_texts(value))
    return found


def in_chinese(document: Any) -> Any:
    """``document`` with each description and summary in Chinese (one of no row stays)."""
    if isinstance(document, dict):
        return {
            key: ZH.get(value, value)
            if key in TEXT_KEYS and isinstance(value, str)
            else in_chinese(value)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [in_chinese(value) for value in document]
    return document
