"""The rows of ``--help`` (help_words): each English help of the two command lines, as the
code says it, with its Chinese for an administrator (the terms of docs/*.zh-CN.md)."""

from __future__ import annotations

TENANT_RULE = "规则适用的租户。"
SINCE = "回溯多久：7d、24h、30m 或 ISO 日期。"
DB_URL = (
    "策略数据库的 SQLAlchemy URL（sqlite:///policy.db、postgresql+psycopg://user:pass@host/db）。"
)

HELP: dict[str, str] = {
    # Typer's and Click's own options
    "Show this message and exit.": "显示本帮助并退出。",
    "Install completion for the current shell.": "为当前 shell 安装命令补全。",
    "Show completion for the current shell, to copy it or customize the installation.": (
        "显示当前 shell 的命令补全脚本，便于复制或自定义安装。"
    ),
    # retrieval-svc
    "Permission-aware retrieval for Dify.": "面向 Dify 的权限感知检索服务。",
    "Run the HTTP service.\n\nWith several workers, each is a full service process (its own "
    "clients, policy watcher and\nmodel) behind one socket; metrics are added up across them "
    "(prometheus-client's\nmultiprocess mode, in a fresh folder unless PROMETHEUS_MULTIPROC_DIR "
    "names one).": (
        "运行 HTTP 服务。\n\n"
        "多个工作进程时，每个都是完整的服务进程（各有自己的客户端、策略监视器和\n"
        "模型），共用一个套接字；指标在各进程间累加（prometheus-client 的多进程模式，\n"
        "使用一个新目录，除非 PROMETHEUS_MULTIPROC_DIR 指定了目录）。"
    ),
    "Bind address [RSVC_HOST].": "绑定地址 [RSVC_HOST]。",
    "Port [RSVC_PORT].": "端口 [RSVC_PORT]。",
    "Worker processes, one per core you give the service [RSVC_WORKERS].": (
        "工作进程数，分给服务的每个 CPU 核一个 [RSVC_WORKERS]。"
    ),
    "Generate an API key: print the secret once, and the entry to configure (hash only).\n\n"
    "With --mode signed a strong token secret is generated too; it is part of the entry\n"
    "(the service needs it to verify tokens) and is what your backend signs tokens with.": (
        "生成 API 密钥：只显示一次密钥本身，以及要写入配置的条目（仅含哈希）。\n\n"
        "使用 --mode signed 时还会生成一个强令牌密钥；它是条目的一部分\n"
        "（服务用它校验令牌），也是你的后端签发令牌所用的密钥。"
    ),
    "A name for the key, shown in logs.": "密钥的名称，显示在日志中。",
    "Tenant the key acts in.": "密钥所属的租户。",
    "Identity mode.": "身份模式。",
    "Comma list of allowed KB patterns.": "允许的知识库模式，逗号分隔。",
    "Comma list of roles the key carries (needed by --mode fixed).": (
        "密钥携带的角色，逗号分隔（--mode fixed 时必需）。"
    ),
    "May call operator endpoints (explain).": "可调用运维端点（explain）。",
    "A SCIM client's key (/scim/v2 only: provisions users and groups).": (
        "SCIM 客户端的密钥（仅限 /scim/v2：同步用户和组）。"
    ),
    "Who calls with it. dify: refuse unknown users and requests without identity, so a wrong "
    "or missing binding fails on its first request.": (
        "由谁调用。dify：拒绝未知用户和不带身份的请求，绑定错误或缺失时第一个请求就会失败。"
    ),
    "Comma list of the shapes callers' user ids take: email, uuid, directory_uid, "
    "regex:<pattern>. Others are refused.": (
        "调用方用户 ID 的格式，逗号分隔：email、uuid、directory_uid、regex:<pattern>。"
        "其他格式一律拒绝。"
    ),
    "Administer a Casbin policy kept in a database (RSVC_CASBIN_DB_URL). Every command "
    "validates its input and is idempotent; a running service picks changes up within "
    "RSVC_POLICY_CHECK_INTERVAL_S.": (
        "管理保存在数据库中的 Casbin 策略（RSVC_CASBIN_DB_URL）。每个命令都先校验输入且可重复"
        "执行；运行中的服务在 RSVC_POLICY_CHECK_INTERVAL_S 内生效。"
    ),
    "SQLAlchemy URL of the policy database (sqlite:///policy.db, "
    "postgresql+psycopg://user:pass@host/db).": DB_URL,
    "Casbin model file.": "Casbin 模型文件。",
    'USER holds ROLE in the tenant (USER is the user id, without "user:").': (
        "USER 在该租户中拥有角色 ROLE（USER 为用户 ID，不带 “user:”）。"
    ),
    "Tenant the rule applies in.": TENANT_RULE,
    "USER no longer holds ROLE in the tenant.": "USER 在该租户中不再拥有角色 ROLE。",
    "Holders of ROLE also hold PARENT in the tenant.": "在该租户中，拥有 ROLE 者也拥有 PARENT。",
    "Undo `inherit`.": "撤销 `inherit`。",
    "SUBJECT (a role, user:ID or anyone) may read knowledge bases matching KNOWLEDGE_IDS\n"
    "(a keyMatch pattern: building-*, *) in the tenant.": (
        "在该租户中，SUBJECT（角色、user:ID 或 anyone）可读取与 KNOWLEDGE_IDS\n"
        "（keyMatch 模式：building-*、*）匹配的知识库。"
    ),
    "Undo `allow`.": "撤销 `allow`。",
    "The rules in force, as Casbin CSV lines (values quoted where they need it).": (
        "当前生效的规则，以 Casbin CSV 行输出（需要时值加引号）。"
    ),
    "Only this tenant's rules.": "只看该租户的规则。",
    "List the stored lines the service skips (each a grant not given, so access is\n"
    "narrower than they say): exit 1 when there is one. `policy delete ROW` removes one.": (
        "列出服务跳过的已存规则行（每行都是未生效的授权，实际访问范围比其所写的更窄）：\n"
        "存在时退出码为 1。用 `policy delete ROW` 删除一行。"
    ),
    "Delete one stored line by its row id, whatever it holds (recorded in the history).": (
        "按行 ID 删除一条已存规则行，不论其内容（记入变更历史）。"
    ),
    "The row id `policy check` names.": "`policy check` 列出的行 ID。",
    "The whole policy as a Casbin CSV file on standard output (`import` reads it back).": (
        "把整个策略以 Casbin CSV 文件输出到标准输出（可用 `import` 读回）。"
    ),
    "Replace the whole policy in the database by FILE (validated first; one transaction).": (
        "用 FILE 替换数据库中的整个策略（先校验；在一个事务中完成）。"
    ),
    "A Casbin CSV policy file.": "Casbin CSV 策略文件。",
    "Make the tenant's grants of the directory's roles what LDAP / Active Directory says:\n"
    "users and groups read whole (paged, nested groups expanded), the difference applied in one\n"
    "transaction and recorded (actor sync-ldap), with the roles the sync now owns. A deleted or\n"
    "renamed group's grants go. Exit 2: the file or what was read cannot be applied; 3: the\n"
    "directory failed or answered partially; 4: past the removal limits. Each changes nothing.": (
        "让该租户中目录角色的授权与 LDAP / Active Directory 一致：\n"
        "完整读取用户和组（分页，展开嵌套组），差异在一个事务中应用并记录（操作者 sync-ldap），\n"
        "同时记下此同步所管理的角色。已删除或改名的组的授权随之移除。退出码 2：同步文件或读到的\n"
        "内容无法应用；3：目录出错或只返回了部分结果；4：超出删除上限。这些情况都不做任何更改。"
    ),
    "The sync file (YAML): server, bases, group → role mapping.": (
        "同步文件（YAML）：服务器、搜索基准、组 → 角色映射。"
    ),
    "Print the changes the sync would make; change nothing.": "显示同步将做的更改，但不做更改。",
    "Refuse to remove more than this share of the directory's grants at once "
    "[the file's, 0.5].": "一次删除的目录授权超过此比例时拒绝执行 [取同步文件中的值，0.5]。",
    "An intended reorganisation: apply whatever the directory says, past the removal limits "
    "(recorded as forced).": "有意的重组：无视删除上限，按目录内容应用（记录为强制执行）。",
    "Sync again at this interval (15m, 1h, 90s, or seconds: 10) until stopped: a schedule "
    "without Kubernetes. A directory whose contextCSN (OpenLDAP with syncprov) or "
    "highestCommittedUSN (Active Directory) has not changed is not read again; a changed "
    "OpenLDAP directory is read only where it changed (a syncrepl refresh). A failed sync is "
    "reported and the next one tried.": (
        "按此间隔（15m、1h、90s，或秒数：10）反复同步直到停止：无需 Kubernetes 的定时任务。"
        "contextCSN（带 syncprov 的 OpenLDAP）或 highestCommittedUSN（Active Directory）"
        "未变化的目录不再重读；已变化的 OpenLDAP 目录只读取变化部分（syncrepl 刷新）。"
        "同步失败会报告，并照常进行下一次。"
    ),
    "With --every: between syncs, ask the directory's change stamp this often (seconds) and "
    "sync at once when it changed, so a change is in force in seconds whatever the interval; "
    "one small search of the root or context entry. 0: only at the interval. Directories "
    "without a stamp sync at the interval.": (
        "与 --every 同用：两次同步之间按此频率（秒）查询目录的变更标记，有变化就立即同步，"
        "因此无论间隔多长，变更都能在几秒内生效；每次只对根条目或上下文条目做一次小查询。"
        "0：只按间隔同步。没有变更标记的目录按间隔同步。"
    ),
    "With --every: stop after this many syncs (0: never).": (
        "与 --every 同用：同步这么多次后停止（0：不停止）。"
    ),
    "Write the sync's metrics here after each sync (node-exporter).": (
        "每次同步后把同步指标写到此文件（node-exporter）。"
    ),
    "Push the sync's metrics to this Pushgateway after each sync.": (
        "每次同步后把同步指标推送到此 Pushgateway。"
    ),
    "Read the audit trail (RSVC_AUDIT=elasticsearch): who retrieved what, and when.": (
        "查看审计记录（RSVC_AUDIT=elasticsearch）：谁在何时检索了什么。"
    ),
    "Events, newest first, since --since: that returned --document, of the subject --user,\n"
    "by --actor; the most recent --limit of all when none is named (--page for older ones).": (
        "自 --since 以来的事件，最新的在前：返回了 --document 的、主体为 --user 的、\n"
        "由 --actor 发起的；都未指定时显示最近 --limit 条（更早的用 --page 查看）。"
    ),
    "Events that returned this document.": "返回了该文档的事件。",
    "Events whose subject (the user whose permissions applied) is this user id.": (
        "主体（按其权限检索的用户）为该用户 ID 的事件。"
    ),
    "Events by this actor: key:<name> or console:<admin key>.": (
        "该操作者发起的事件：key:<name> 或 console:<admin key>。"
    ),
    "How far back: 7d, 24h, 30m or an ISO date.": SINCE,
    "Only this tenant's trail.": "只看该租户的审计记录。",
    "Events a page, at most.": "每页最多的事件数。",
    "Which page of --limit events (1: the newest).": "每页 --limit 条时看第几页（1：最新）。",
    "JSON lines.": "输出 JSON Lines。",
    "Every change to the policy since --since, newest first: when, actor, source (cli,\n"
    "console, ldap, scim), tenant, action, counts and the lines added (+) and removed (-).\n"
    "Read from the policy database, where each change is recorded in its own transaction.": (
        "自 --since 以来策略的每次变更，最新的在前：时间、操作者、来源（cli、\n"
        "console、ldap、scim）、租户、操作、计数，以及新增（+）和删除（-）的规则行。\n"
        "读自策略数据库，每次变更都在其自身的事务中记录。"
    ),
    "Only this tenant's changes.": "只看该租户的变更。",
    "Changes touching this user (user:<id>), role or knowledge-base pattern.": (
        "涉及该用户（user:<id>）、角色或知识库模式的变更。"
    ),
    "Events, at most.": "最多的事件数。",
    "Changed lines shown per event.": "每个事件显示的变更行数。",
    "JSON lines, every changed line.": "输出 JSON Lines，含每一条变更行。",
    "SQLAlchemy URL of the policy database.": "策略数据库的 SQLAlchemy URL。",
    "Who a caller's user id is (the policy database, RSVC_CASBIN_DB_URL): the explicit map for "
    "ids no directory holds, and what an id resolves to.": (
        "调用方的用户 ID 对应谁（策略数据库，RSVC_CASBIN_DB_URL）：为目录中没有的 ID 设的"
        "显式映射，以及某个 ID 解析的结果。"
    ),
    "What USER_ID resolves to in the tenant: a known person, another id of one, or no one\n"
    "(exit 1), as the service would decide it now.": (
        "USER_ID 在该租户中解析为谁：已知的人、某人的另一个 ID，或查无此人\n"
        "（退出码 1），与服务此刻的判定相同。"
    ),
    "An id as a caller would send it.": "调用方发送的 ID 原样。",
    "The explicit map: ids no directory holds → the person's directory id.": (
        "显式映射：目录中没有的 ID → 此人的目录 ID。"
    ),
    "Replace the tenant's map by FILE: each id (a Dify end-user UUID, an e-mail…) names the\n"
    "person (their directory id, as grants name them). Checked whole first; recorded in the\n"
    "permission history with every change.": (
        "用 FILE 替换该租户的映射：每个 ID（Dify 终端用户 UUID、电子邮件地址…）指向一个人\n"
        "（其目录 ID，与授权中的写法一致）。先整体校验；每项变更都记入权限历史。"
    ),
    "CSV: id,person per line (a header allowed).": "CSV：每行 id,person（可带表头）。",
    "The tenant's map as the CSV ``import`` reads (a header, then id,person; ids are\n"
    "compared exactly, so they read back as imported).": (
        "该租户的映射，格式即 ``import`` 读取的 CSV（表头，然后每行 id,person；ID 按原样\n"
        "比较，所以读出的与导入的一致）。"
    ),
}
