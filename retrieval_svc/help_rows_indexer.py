"""The rows of ``retrieval-indexer --help`` (help_words): each English help, as the code says
it, with its Chinese for an administrator (the terms of docs/indexer.zh-CN.md)."""

from __future__ import annotations

SOURCE = "oss://bucket/prefix、s3://bucket/prefix、smb://server/share/folder 或一个文件夹。"
TENANT_OWNS = "知识库所属的租户（即 API 密钥的租户）；每个租户有自己的索引。"

HELP: dict[str, str] = {
    "Load documents into retrieval-svc's chunk index.": "把文档载入 retrieval-svc 的分块索引。",
    "Show tracebacks of errors.": "出错时显示调用栈（traceback）。",
    "Index SOURCE into a knowledge base; exit 1 if any document failed.": (
        "把 SOURCE 索引进一个知识库；有文档失败时退出码为 1。"
    ),
    "oss://bucket/prefix, s3://bucket/prefix, smb://server/share/folder or a folder.": SOURCE,
    "Knowledge base id (Dify's knowledge_id).": "知识库 ID（Dify 的 knowledge_id）。",
    "Tenant that owns the knowledge base (the API keys' tenant); it has its own index.": (
        TENANT_OWNS
    ),
    "Knowledge base display name.": "知识库显示名称。",
    "JSON Lines metadata, one object per document with 'path'.": (
        "JSON Lines 元数据，每个文档一个带 'path' 的对象。"
    ),
    "source_file_url from {key} {uri} {bucket} {name}.": (
        "由 {key} {uri} {bucket} {name} 组成 source_file_url。"
    ),
    "Folder rules (YAML): access_roles by glob over object keys; see docs/permissions.md. "
    "Checked whole before anything is written.": (
        "文件夹规则（YAML）：按对象键的 glob 设定 access_roles；见 docs/permissions.md。"
        "写入任何内容之前先整体校验。"
    ),
    "Index only shard I of N of SOURCE (I from 0): every object is in exactly one shard, the "
    "same on every run; pruning touches this shard's documents only. A Kubernetes indexed Job "
    "sets it from JOB_COMPLETION_INDEX and RSVC_INDEXER_SHARDS.": (
        "只索引 SOURCE 的第 I 个分片（共 N 个，I 从 0 起）：每个对象恰好属于一个分片，每次运行"
        "都相同；清理只涉及本分片的文档。Kubernetes 带索引的 Job 由 JOB_COMPLETION_INDEX 和 "
        "RSVC_INDEXER_SHARDS 设置它。"
    ),
    "Never index keys matching this glob (as in folder rules: '**/archive/**', '*.bak'); "
    "repeatable. Passed over and counted, never failed. Lock, temporary and system files "
    "(~$*.docx, Thumbs.db…) are always passed over.": (
        "从不索引与此 glob 匹配的键（写法同文件夹规则：'**/archive/**'、'*.bak'）；可重复。"
        "这些文件被跳过并计数，不算失败。锁文件、临时文件和系统文件（~$*.docx、Thumbs.db…）"
        "总是跳过。"
    ),
    "Read access_roles from this object tag (S3/OSS tagging; roles separated by spaces). "
    "One request per object per run.": (
        "从此对象标签读取 access_roles（S3/OSS 对象标签；角色以空格分隔）。"
        "每次运行每个对象一次请求。"
    ),
    "smb:// only: read <file>.meta.json sidecars. Off by default: on a share, anyone who may "
    "create a file in a folder could write one and retitle, narrow or hide documents they "
    "cannot change. Turn on only where sidecars' writers are the documents' writers.": (
        "仅限 smb://：读取 <file>.meta.json sidecar 文件。默认关闭：在共享上，任何能在文件夹中"
        "建文件的人都能写一个 sidecar，从而改标题、收窄或隐藏他们本无权修改的文档。"
        "只有当 sidecar 的写入者就是文档的写入者时才开启。"
    ),
    "The name each document records of the source it came from (default: the folder's "
    "absolute path, or the bucket URL). A run prunes only its own source's documents; set it "
    "to keep a source's documents across a move of its folder.": (
        "每个文档记下的来源名称（默认：文件夹的绝对路径，或存储桶 URL）。一次运行只清理"
        "本来源的文档；文件夹搬迁时设置它以保留该来源的文档。"
    ),
    "Most characters per chunk.": "每个分块最多的字符数。",
    "Characters repeated between chunks.": "相邻分块之间重复的字符数。",
    "Delete documents of the knowledge base that SOURCE no longer holds (moved, deleted, "
    "renamed). Default: on when the knowledge base's last run read this same SOURCE; otherwise "
    "off, and the summary says why.": (
        "删除知识库中 SOURCE 已不再包含的文档（已移动、删除、改名）。默认：知识库上次运行"
        "读取的是同一个 SOURCE 时开启；否则关闭，并在汇总中说明原因。"
    ),
    "Re-index unchanged documents too.": "未变化的文档也重新索引。",
    "Parse and chunk, write nothing.": "只解析和分块，不写入任何内容。",
    "Documents read and parsed at once.": "同时读取和解析的文档数。",
    "The run's memory bound (MB): workers and --doc-memory-mb fit in it.": (
        "本次运行的内存上限（MB）：工作进程和 --doc-memory-mb 都在其内。"
    ),
    "Worker processes that parse under the time and memory limits [the cores given, at most 8, "
    "as many as --memory-mb holds]; 0 parses in this process, with the size limits only.": (
        "在时间和内存限制下解析的工作进程数 [分到的 CPU 核数，至多 8，且不超过 --memory-mb "
        "容得下的数量]；0 表示在本进程内解析，只受大小限制。"
    ),
    "Seconds one document may take to parse and chunk.": "单个文档解析和分块可用的秒数。",
    "Memory (MB) one document may take in its worker [from --memory-mb].": (
        "单个文档在其工作进程中可用的内存（MB）[由 --memory-mb 推出]。"
    ),
    "Largest object read, in bytes (checked before reading).": (
        "读取的对象最大字节数（读取前检查）。"
    ),
    "Most bytes an Office (zip) file may unpack to.": "Office（zip）文件解压后最多的字节数。",
    "Most characters of text in one document.": "单个文档最多的文本字符数。",
    "Most pages of a PDF or TIFF, slides, or sheets.": (
        "PDF 或 TIFF 的最多页数、幻灯片数或工作表数。"
    ),
    "Most pixels of an image or a page read by OCR.": "图片或 OCR 读取的页面最多的像素数。",
    "Read pages without a text layer, and images, by OCR: auto (those pages only), off (never: "
    "such files fail), force (every PDF page).": (
        "用 OCR 读取没有文字层的页面和图片：auto（只读这些页面）、off（从不：此类文件失败）、"
        "force（PDF 的每一页）。"
    ),
    "Seconds added to --doc-timeout per page read by OCR.": (
        "每个 OCR 读取的页面在 --doc-timeout 上追加的秒数。"
    ),
    "Object store endpoint [OSS_ENDPOINT / AWS_ENDPOINT_URL].": (
        "对象存储端点 [OSS_ENDPOINT / AWS_ENDPOINT_URL]。"
    ),
    "Object store region [OSS_REGION / AWS_REGION].": "对象存储地域 [OSS_REGION / AWS_REGION]。",
    "Print the report as JSON on stdout.": "把报告以 JSON 输出到标准输出。",
    "Write run metrics here (node-exporter textfile).": (
        "把运行指标写到此文件（node-exporter textfile）。"
    ),
    "Push run metrics to this Pushgateway.": "把运行指标推送到此 Pushgateway。",
    "Seconds the source's lease lasts unrenewed: every writer of a source and shard (a run, a "
    "watcher) holds it while it writes; one that dies is waited for this long (its own "
    "successor takes over at once).": (
        "来源租约不续期时的有效秒数：来源和分片的每个写入者（一次运行、一个监视器）写入时都持有"
        "租约；写入者中途退出时，等待这么久（其自身的后继者立即接管）。"
    ),
    "Seconds a run waits for its source's lease (a watcher steps aside within seconds; another "
    "run holds it until it ends); then it writes nothing and exits 4.": (
        "一次运行等待其来源租约的秒数（监视器会在几秒内让出；另一个运行则持有到结束）；"
        "超时后不写入任何内容，退出码为 4。"
    ),
    "Apply the index template and create the tenant's first index if missing.": (
        "应用索引模板，并在缺少时创建该租户的第一个索引。"
    ),
    "Delete a knowledge base's chunks, or some documents'.": (
        "删除一个知识库的分块，或其中某些文档的分块。"
    ),
    "Knowledge base to delete from.": "要从中删除的知识库。",
    "Only these documents (repeatable).": "只删除这些文档（可重复）。",
    "Really delete; without it, only count.": "真正删除；不加此选项时只计数。",
    "Every tenant's index and counts per knowledge base.": "每个租户的索引，以及各知识库的计数。",
    "Copy each tenant's index into a new one from the current template and swap its alias.\n\n"
    "In the shared layout of earlier versions (every tenant in one index behind the alias\n"
    "itself), this splits it: each tenant's chunks into an index of its own.": (
        "按当前模板把每个租户的索引复制到新索引，并切换其别名。\n\n"
        "对早期版本的共享布局（所有租户在别名背后的同一个索引中），此命令将其拆分：\n"
        "每个租户的分块进入各自的索引。"
    ),
    "Only this tenant's index (default: every tenant's).": "只处理该租户的索引（默认：所有租户）。",
    "Keep the old index after the swap.": "切换后保留旧索引。",
    "What a knowledge base holds: each document's format, pages, pages read by OCR and\n"
    "chunks, and what the last run failed or passed over; with --document, its chunks.": (
        "知识库中有什么：每个文档的格式、页数、OCR 读取的页数和\n"
        "分块数，以及上次运行失败或跳过的文档；加 --document 时显示该文档的分块。"
    ),
    "Knowledge base to show.": "要显示的知识库。",
    "A document's id or file name: print its chunks as stored.": (
        "文档 ID 或文件名：按存储原样输出其分块。"
    ),
    "Keep a knowledge base true to SOURCE, in seconds: the source's events (a folder's own;\n"
    "a bucket's through --events sqs://QUEUE) and a re-listing every --rescan seconds,\n"
    "narrowing first (a deleted or moved document leaves, a changed one answers no one until it\n"
    "is read again), then the same pipeline as `index`. Runs until stopped (SIGTERM, Ctrl-C).": (
        "让知识库在几秒内与 SOURCE 保持一致：依据来源的事件（文件夹自身的事件；\n"
        "存储桶的经 --events sqs://QUEUE）以及每 --rescan 秒一次的重新列举，\n"
        "先收窄（已删除或移动的文档移出，已更改的文档在重新读取前不返回给任何人），\n"
        "再走与 `index` 相同的流程。一直运行直到停止（SIGTERM、Ctrl-C）。"
    ),
    "Seconds between re-listings of the whole source (sizes, times and sidecars compared; "
    "unchanged files are not read): the path that finds what events missed — a mounted share "
    "may deliver none.": (
        "两次重新列举整个来源之间的秒数（比较大小、时间和 sidecar；未变化的文件不读取）："
        "用来发现事件遗漏的变化——挂载的共享可能根本不发事件。"
    ),
    "A bucket's event notifications: sqs://QUEUE (or the queue's URL), ObjectCreated, "
    "ObjectRemoved and ObjectTagging events. A folder's events are its own. 'none': the "
    "re-listing alone.": (
        "存储桶的事件通知：sqs://QUEUE（或队列的 URL），ObjectCreated、ObjectRemoved 和 "
        "ObjectTagging 事件。文件夹用其自身的事件。'none'：只靠重新列举。"
    ),
    "A bucket's events pushed over HTTP to HOST:PORT (or :PORT): MinIO's webhook or "
    "EventBridge's HTTP target (OSS). Requests carry Authorization: Bearer TOKEN.": (
        "存储桶事件经 HTTP 推送到 HOST:PORT（或 :PORT）：MinIO 的 webhook 或 EventBridge 的 "
        "HTTP 目标（OSS）。请求带 Authorization: Bearer TOKEN。"
    ),
    "A file whose first line is --listen's token (else the environment's "
    "RSVC_WATCH_LISTEN_TOKEN).": (
        "首行为 --listen 令牌的文件（否则取环境变量 RSVC_WATCH_LISTEN_TOKEN）。"
    ),
    "--listen also takes Alibaba Cloud MNS's HTTP push (a topic's HTTP subscription), verified "
    "by its signature instead of the token: the certificate only from "
    "RSVC_WATCH_MNS_CERT_HOSTS (default: Alibaba Cloud's).": (
        "--listen 也接收阿里云 MNS 的 HTTP 推送（主题的 HTTP 订阅），以其签名而非令牌校验："
        "证书只从 RSVC_WATCH_MNS_CERT_HOSTS 获取（默认：阿里云的）。"
    ),
    "A folder's events gathered this long (ms).": "文件夹事件的汇集时长（毫秒）。",
    "Port of /metrics, /healthz, /readyz (0: any; -1: none).": (
        "/metrics、/healthz、/readyz 的端口（0：任意；-1：不开）。"
    ),
    "Who this watcher is to its source's lease [the host's name]. A watcher started again "
    "under the same name takes over its predecessor's lease at once (on the same host: once "
    "the old process is gone; under a name given here: from any host). Give a Deployment's one "
    "replica a fixed name.": (
        "此监视器在其来源租约中的名字 [主机名]。以同一名字重新启动的监视器会立即接管前任的租约"
        "（同一主机上：旧进程退出后；用这里指定的名字：任何主机上都可）。"
        "请给 Deployment 的唯一副本一个固定名字。"
    ),
}
