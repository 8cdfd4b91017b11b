"""Why a document was not indexed, why a file was passed over, and what set a document's roles:
a code beside each English text, and the text in the reader's language (issue #48 §5).

The indexer writes its reasons in English, where they are made (``DocumentError``, the budget,
the listing). Each one it can give has a row here: a code, the English text's shape (with the
values it carries as named groups) and the same sentence in Chinese — what happened and what
to do. ``Report.fail`` and the run record keep the code beside the text; the console shows the
sentence in its page's language, and the English text where a row is missing (code
``other``, so a new reason is never lost, only untranslated). ``tests/unit/test_reasons.py``
holds every reason the indexer's code can write to a row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WITHDRAWN = " (its older chunks were withdrawn: they answer no one)"
_WITHDRAWN_ZH = "（其旧分段已撤下，不再对任何人可见）"


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason the indexer gives: its code, its English shape, its Chinese sentence."""

    code: str
    english: re.Pattern[str]
    chinese: str  # str.format with the pattern's named groups


def row(code: str, english: str, chinese: str) -> Reason:
    """A row of a table: its code, the English text's shape (a regular expression), the Chinese."""
    return Reason(code, re.compile(english, re.S), chinese)


_N = r"(?P<{}>[\d,.]+)"
FAILURES: tuple[Reason, ...] = (
    # Limits (indexer.budget): the value, the limit, the option.
    row(
        "limit_bytes",
        rf"^the object is {_N.format('size')} bytes, over the limit of {_N.format('limit')}",
        "文件有 {size} 字节，超过上限 {limit}（--max-doc-bytes）：调大该参数，或用 --exclude 排除它",
    ),
    row(
        "limit_chars",
        rf"^the text is {_N.format('size')} characters, over the limit of {_N.format('limit')}",
        "文本有 {size} 个字符，超过上限 {limit}（--max-chars）：调大该参数，或拆分文档",
    ),
    row(
        "limit_pages",
        rf"^(?P<what>.+?) {_N.format('size')} (?P<unit>\w+), over the limit of {_N.format('limit')} \(--max-pages\)",
        "页数（页、幻灯片或工作表）{size}，超过上限 {limit}（--max-pages）：调大该参数，或拆分文档",
    ),
    row(
        "limit_pixels",
        r"^the image is (?P<width>[\d,]+) × (?P<height>[\d,]+) pixels, over the limit of (?P<limit>[\d,]+)",
        "图片为 {width} × {height} 像素，超过上限 {limit}（--max-pixels）：缩小图片，或调大该参数",
    ),
    row(
        "limit_unpacked",
        rf"^the file unpacks to {_N.format('size')} bytes, over the limit of {_N.format('limit')}",
        "文件解压后有 {size} 字节，超过上限 {limit}（--max-unpacked-bytes）：可能是压缩炸弹；确属正常文件则调大该参数",
    ),
    row(
        "limit_entries",
        rf"^the file unpacks to {_N.format('size')} entries, over the limit of {_N.format('limit')}",
        "文件解压后有 {size} 个条目，超过上限 {limit}：可能是压缩炸弹（大量小文件）；确属正常文件请联系管理员",
    ),
    row(
        "limit_time",
        r"^parsing took longer than (?P<seconds>[\d.]+) s \(--doc-timeout\)",
        "解析超过 {seconds} 秒（--doc-timeout），工作进程已停止：调大 --doc-timeout（扫描件可调大 --ocr-page-seconds）",
    ),
    row(
        "limit_memory",
        r"^parsing needed more than (?P<mb>\d+) MB \(--doc-memory-mb\)",
        "解析所需内存超过 {mb} MB（--doc-memory-mb），工作进程已替换：调大 --doc-memory-mb 或 --memory-mb",
    ),
    # Reading the source.
    row(
        "link",
        r"^(?:sidecar )?(?P<name>.+?) is a symbolic link: links are never followed",
        "{name} 是符号链接：符号链接一律不跟随（链接目标在其所在位置、按其自身权限索引）；附属文件是链接时，文档不予索引",
    ),
    row(
        "link",
        r"^sidecar (?P<name>.+?) is a reparse point: links are never followed",
        "附属文件 {name} 是重解析点（链接）：链接一律不跟随，文档不予索引",
    ),
    row(
        "dacl_unreadable",
        r"^its security descriptor cannot be read: (?P<detail>.+)$",
        "无法读取其安全描述符（{detail}）：给索引账户授予“读取权限”（READ_CONTROL）；文档不会被当作公开文档发布",
    ),
    row(
        "dacl_malformed",
        r"^its security descriptor is malformed: (?P<detail>.+)$",
        "其安全描述符格式错误（{detail}）：文档不会被当作公开文档发布",
    ),
    row(
        "dacl_nobody",
        r"^its DACL lets no one read its data",
        "其 DACL 不允许任何人读取内容（空 DACL，或没有授予读取的允许项）：不予索引",
    ),
    row(
        "share_nobody",
        r"^its DACL and the ACL of share (?P<share>.+?) let no one read its data",
        "其 DACL 与共享 {share} 的共享权限（共享 ACL）合起来不允许任何人读取内容：不予索引",
    ),
    row(
        "share_nobody",
        r"^its DACL and the ACL of share (?P<share>.+?) name no SID in common, and another layer",
        "其 DACL 与共享 {share} 的共享权限没有共同的 SID，且另有规则文件、附属文件或前置元数据再收窄它：索引只能同时保存两个列表，为不放宽而不给任何人，不予索引",
    ),
    row(
        "share_acl_unreadable",
        r"^the share's permissions \(its share ACL\) cannot be read: (?P<detail>.+)$",
        "无法读取共享的权限（共享 ACL）（{detail}）：在 Windows 上，索引账户须是文件服务器本机 Administrators、Server Operators 或 Power Users 组的成员才能读取；在此之前整个数据源视为中断——不列出、不清理、不放宽任何文档",
    ),
    row(
        "not_a_file",
        r"^(?P<name>.+) is not a regular file$",
        "{name} 不是普通文件（可能在列出后被替换为 FIFO、设备或套接字）",
    ),
    row(
        "listing_failed",
        r"^(?:(?P<place>.+?) )?cannot be listed: (?P<detail>.+)$",
        "无法列出{place}（{detail}）：检查索引程序对它的读取权限；其下已索引的文档已撤下，而不是当作已删除清理，本次运行以失败结束",
    ),
    row(
        "another_source",
        r"^already indexed from another source of this knowledge base \((?P<other>.+?)\): ",
        "已由本知识库的另一个数据源（{other}）索引：两个数据源会写入同一个文档。请把其中一个索引到另一个知识库；若 {other} 就是本数据源的旧名称，加 --source-name 指定它",
    ),
    # Reading the file.
    row(
        "unsupported",
        r"^unsupported file type '(?P<suffix>[^']*)'",
        "不支持的文件类型 {suffix}：转换为支持的格式，或用 --exclude 排除",
    ),
    row(
        "encrypted",
        r"^the .+? is password-protected",
        "文件有密码保护（已加密）：去掉密码后重新保存即可索引",
    ),
    row(
        "misnamed",
        r"^named (?P<suffix>\.\w+) but (?:it is|its content is) (?P<kind>.+)$",
        "文件扩展名为 {suffix}，但内容是 {kind}：按实际格式改名或另存",
    ),
    row(
        "libreoffice_missing",
        r"^(?P<suffix>\.\w+) \((?P<what>[^)]*)\) files are read through LibreOffice",
        "{suffix}（{what}）文件需经 LibreOffice 读取：请安装 LibreOffice（Debian：libreoffice-core-nogui 及 writer、calc、impress 组件；scripts/libreoffice.sh 可自动安装；Docker 镜像已包含）",
    ),
    row(
        "libreoffice_failed",
        r"^LibreOffice (?:could not read|took more than|could not be started)",
        "LibreOffice 无法转换该文件（可能已损坏、有密码保护，或内容与扩展名不符）：用 Office 或 WPS 打开后另存为 .docx / .xlsx / .pptx；若是超时，调大 --doc-timeout",
    ),
    row(
        "ocr_off",
        r"^an image is read only by OCR, and --ocr is off|--ocr is off",
        "图片或扫描页只能用 OCR 读取，而本次运行指定了 --ocr off：去掉该参数（默认 auto）",
    ),
    row(
        "ocr_failed",
        r"^OCR failed: (?P<detail>.*)$",
        "OCR 识别失败（{detail}）：检查图片是否为文字页面，尺寸或形状是否异常",
    ),
    row(
        "image_unreadable",
        r"^image cannot be read",
        "图片无法读取（文件损坏或截断）：重新导出或扫描",
    ),
    row(
        "office_unreadable",
        r"^(?:DOCX|PPTX|Excel file|CSV|.+?) cannot be read: (?P<detail>.*)$",
        "文件无法读取（{detail}）：文件可能已损坏或不完整，用原来的程序打开后重新保存或导出",
    ),
    row(
        "text_encoding",
        r"^text is neither UTF-8 nor GB18030",
        "文本既不是 UTF-8 也不是 GB18030 编码：另存为 UTF-8",
    ),
    row(
        "no_text",
        r"^no text to index",
        "没有可索引的文字：如果是扫描件，请勿使用 --ocr off；空文档可用 --exclude 排除",
    ),
    # Metadata and roles.
    row(
        "front_matter",
        r"^front matter",
        "front matter（文档开头的 --- 元数据块）有误：按原因修正 YAML",
    ),
    row("sidecar", r"^sidecar (?P<name>\S+) ", "附属文件 {name} 有误：必须是一个 JSON 对象"),
    row(
        "roles_unreadable",
        r"^access_roles cannot be read",
        "access_roles 无法读取：应为角色列表、JSON 数组或逗号分隔文本；文档不会被当作公开文档发布",
    ),
    row(
        "roles_reserved",
        r"^access_roles: .*per-user sharing is not supported",
        "access_roles 中不能使用 user:… 或 anyone：给文档一个角色，再把角色授予用户（retrieval-svc policy grant-role）",
    ),
    row(
        "rules_refuse",
        r"^no rule of (?P<file>.+?) matches it and the file says 'unmatched: refuse'",
        "{file} 中没有规则匹配该文件，且规则文件写明 unmatched: refuse：为其所在文件夹添加规则，或给文档设置 access_roles",
    ),
    row(
        "tag_unreadable",
        r"^tag (?P<name>\S+) ",
        "对象标签 {name} 无法读取或其中的角色无效：检查标签值（角色以空格分隔）与读取权限；文档不会被当作公开文档发布",
    ),
    row(
        "metadata_limit",
        r"^(?:metadata |.+? is [\d,]+ bytes, over the limit of )",
        "元数据超出限制（值太多、嵌套太深或太大）：精简文档的元数据",
    ),
    # Writing.
    row(
        "write_failed",
        r"^some chunks were not (?:written|re-tagged)",
        "部分分段未能写入 Elasticsearch（见日志）：下一次运行会重试",
    ),
    row(
        "retag_text_changed",
        r"^its roles changed but its text differs",
        "角色已变，但文本与已存分段不同（分块方式变了？）：加 --force 重新写入",
    ),
)

PASSED_OVER: tuple[Reason, ...] = (
    row("scratch", r"^a lock, temporary or system file$", "锁文件、临时文件或系统文件"),
    row("unsupported", r"^unsupported (?P<suffix>\.\S+)$", "不支持的类型 {suffix}"),
    row("unsupported", r"^unsupported \(no suffix\)$", "不支持的类型（无扩展名）"),
    row("excluded", r"^excluded \((?P<origin>.+)\)$", "已排除（{origin}）"),
    row(
        "odd_key",
        r"^an empty, '\.' or '\.\.' folder in the key",
        "路径中有空的、“.”或“..”文件夹（如 docs//a.md）：重命名该对象",
    ),
    row("link", r"^a symbolic link: not followed$", "符号链接：一律不跟随（其目标在所在位置索引）"),
    row(
        "reparse_point",
        r"^a reparse point \(a link, junction or DFS link\): not followed$",
        "重解析点（链接、联接或 DFS 链接）：一律不跟随",
    ),
    row(
        "share_sidecar",
        r"^a sidecar on a share: not read \(--share-sidecars\)$",
        "共享上的附属文件：不读取（--share-sidecars）",
    ),
    row("name_encoding", r"^the name is not valid UTF-8$", "文件名不是有效的 UTF-8"),
    row("unreadable", r"^cannot be read: (?P<detail>.+)$", "无法读取：{detail}"),
    row("not_a_file", r"^not a regular file", "不是普通文件（FIFO、设备或套接字）"),
)

ROLE_SOURCES: tuple[Reason, ...] = (
    row("rule_globs", r"^rule \((?P<glob>.+?)(?P<override>, override)?\) of (?P<file>.+)$",
       "{file} 中的规则（{glob}{override}）"),
    # (as documents indexed before a rule was recorded by its globs alone name it)
    row("rule", r"^rule (?P<number>\d+) \((?P<glob>.+?)(?P<override>, override)?\) of (?P<file>.+)$",
       "{file} 的第 {number} 条规则（{glob}{override}）"),
    row("unmatched_public", r"^unmatched: public, in (?P<file>.+)$", "{file} 的 unmatched: public"),
    row("tag", r"^tag (?P<name>.+)$", "对象标签 {name}"),
    row("front_matter", r"^front matter$", "front matter"),
    row("sidecar", r"^sidecar$", "附属文件"),
    row("manifest", r"^manifest$", "清单文件"),
    row("metadata", r"^metadata$", "元数据"),
    row("dacl", r"^DACL of (?P<name>.+?), share (?P<share>.+?), narrowed by (?P<by>.+)$",
        "{name} 的 DACL 与共享 {share} 的共享权限，并由{by}收窄"),
    row("dacl", r"^DACL of (?P<name>.+?), share (?P<share>.+)$", "{name} 的 DACL 与共享 {share} 的共享权限"),
    row("dacl", r"^DACL of (?P<name>.+?), narrowed by (?P<by>.+)$", "{name} 的 DACL，并由{by}收窄"),
    row("dacl", r"^DACL of (?P<name>.+)$", "{name} 的 DACL"),
)  # fmt: skip


def match_row(table: tuple[Reason, ...], text: str) -> tuple[Reason, dict[str, str]] | None:
    """The first row of ``table`` whose English shape ``text`` has, with its values."""
    for reason in table:
        if found := reason.english.search(text):
            return reason, {k: v or "" for k, v in found.groupdict().items()}
    return None


def failure_code(text: str) -> str:
    """The code of a failure's English text (``other`` when no row has it)."""
    found = match_row(FAILURES, text.removesuffix(WITHDRAWN))
    return found[0].code if found else "other"


def passed_over_code(text: str) -> str:
    found = match_row(PASSED_OVER, text)
    return found[0].code if found else "other"


def _said(table: tuple[Reason, ...], text: str, language: str) -> str:
    if language != "zh":
        return text
    found = match_row(table, text)
    if found is None:
        return text
    reason, values = found
    if "override" in values:
        values["override"] = "，优先" if values["override"] else ""
    return reason.chinese.format(**values)


def failure_text(text: str, language: str) -> str:
    """A failure's reason in ``language`` (``en`` or ``zh``)."""
    withdrawn = text.endswith(WITHDRAWN)
    said = _said(FAILURES, text.removesuffix(WITHDRAWN), language)
    return said + (_WITHDRAWN_ZH if language == "zh" else WITHDRAWN) if withdrawn else said


def passed_over_text(text: str, language: str) -> str:
    return _said(PASSED_OVER, text, language)


def roles_source_text(text: str, language: str) -> str:
    """What set a document's roles (``rule 1 (财务/**) of acl-rules.yaml``) in ``language``."""
    return _said(ROLE_SOURCES, text, language)
