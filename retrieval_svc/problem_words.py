"""Why something was refused — a name, a role, an API key entry, a setting, a rules or sync
file, an option's value — as a row in English and Chinese: the English is made where the
refusal is decided (the ground floor speaks English), and ``retrieval_svc.words.problem``
says it again in the reader's language where it is printed. ``tests/unit/test_words.py`` holds
every row to both languages; ``test_cli_words_held`` holds the refusals to the rows.

Pure data: imports nothing.
"""

from __future__ import annotations

# Why a name, a role or an id was refused (retrieval_svc.names, acl.admin): made in English
# where they are decided, said again in the reader's language where they are printed.
PROBLEMS: dict[str, tuple[str, str]] = {
    "tenants_exact": ("tenants match exactly", "租户按名称精确匹配"),
    "tenants_exact_every": ("tenants match exactly ('*' alone means every tenant)", "租户按名称精确匹配（单独一个 '*' 表示所有租户）"),
    "problem_at_line": ("{origin} line {number}: {problem}", "{origin} 第 {number} 行：{problem}"),
    "name_not_text": ("{what} must be text, not {kind}", "{what} 必须是文本，而不是 {kind}"),
    "name_empty": ("{what} is empty", "{what} 为空"),
    "name_too_long": ("{what} is longer than {max} characters ({n})", "{what} 超过 {max} 个字符（{n}）"),
    "name_white_space": ("{what} {value} begins or ends with white space: remove it", "{what} {value} 以空白开头或结尾：请去掉"),
    "name_holds": ("{what} {value} holds {kind} (U+{code}) at position {position}: a name cannot hold one", "{what} {value} 在第 {position} 个字符处含有{kind}（U+{code}）：名称中不能有"),
    "role_is_user": ("{what} {value} is a user, not a role (user: names users)", "{what} {value} 是用户，不是角色（user: 表示用户）"),
    "role_is_anyone": ("{what} {value} is every principal, not a role to hold or inherit", "{what} {value} 表示所有主体，不是可持有或继承的角色"),
    "role_is_sid": ("{what} {value} names a Windows SID: only an Active Directory sync gives it", "{what} {value} 是 Windows SID：只有 Active Directory 同步能授予它"),
    "user_prefix": ("give the user id without {prefix} (the policy adds it): {value}", "给出用户 ID 时不要带 {prefix}（策略会自动加上）：{value}"),
    "id_too_long": ("id is {n} characters, over {max}", "ID 有 {n} 个字符，超过 {max}"),
    "id_mapped_twice": ("id {value} is mapped on line {line} too", "ID {value} 在第 {line} 行也有映射"),
    "lone_surrogate": ("{where} holds a lone surrogate (not UTF-8): it cannot be stored", "{where} 含有孤立代理项（不是 UTF-8）：无法存储"),
    "skipped_word": ("skipped", "已跳过"),
    "user_id_prefixed": ("user id {user} begins with 'user:'", "用户 ID {user} 以 'user:' 开头"),
    "group_gives_no_role": ("{what}: that group gives no role {role}", "{what}：该组不授予角色 {role}"),
    "rename_or_map": ("rename it or map it", "请重命名它或为它映射角色"),
    "foreign_principal": ("foreign security principal {sid} (in {groups}): not in this directory", "外部安全主体 {sid}（属于 {groups}）：不在本目录中"),
    "nobody_through_it": ("nobody holds a group through it", "没有人经由它持有组"),
    "user_id_shared": ("user id {user} is held by {n} entries as the directory compares ids ({kind}): {entries}: refused for each, none gets a role from the directory. Keep ids unique or sync with another users.id_attribute", "用户 ID {user} 按目录比较 ID 的方式（{kind}）由 {n} 个条目共用：{entries}：每个条目都被拒绝，都不会从目录获得角色。请保持 ID 唯一，或改用另一个 users.id_attribute 同步"),
    "cannot_inherit_self": ("role {role} cannot inherit itself", "角色 {role} 不能继承自己"),
    # an API key entry (retrieval_svc.key_entry) and the settings that hold it
    "key_placeholder": ("this is the hash of a placeholder key: generate a real one", "这是占位密钥的哈希：请生成一个真正的密钥"),
    "key_signed_no_secret": ("API key {name} has mode signed but no token_secret: set one (`{command}` generates a strong one)", "API 密钥 {name} 的模式为 signed，却没有 token_secret：请设置一个（`{command}` 会生成足够强的）"),
    "key_role": ("API key {name}: role {why}", "API 密钥 {name}：角色 {why}"),
    "key_scim_admin": ("API key {name} is both a SCIM client's and an admin's: give each its own key (a SCIM key provisions people, it never reads or administers)", "API 密钥 {name} 既是 SCIM 客户端的，又是管理员的：请各用各的密钥（SCIM 密钥只开通人员，从不读取或管理）"),
    "key_fixed_no_roles": ("API key {name} has mode fixed but no roles: set the roles it carries (`{command}`)", "API 密钥 {name} 的模式为 fixed，却没有角色：请设置它携带的角色（`{command}`）"),
    "key_problem": ("API key {name}: {problem}", "API 密钥 {name}：{problem}"),  # (after the rows it would also match)
    "reserved_user": ("{role} names a user ({prefix}<id>), not a role", "{role} 表示用户（{prefix}<id>），不是角色"),
    "reserved_anyone": ("{anyone} is held by every principal and cannot be asserted", "{anyone} 由所有主体持有，不能声明"),
    "reserved_sid": ("{role} names a Windows SID ({prefix}S-…): only the directory gives it", "{role} 是 Windows SID（{prefix}S-…）：只有目录能授予它"),
    "keys_unreadable": ("cannot read API keys file {path}: {why}", "无法读取 API 密钥文件 {path}：{why}"),
    "keys_not_a_list": ("API keys file {path} must hold a list of keys or {{keys: [...]}}", "API 密钥文件 {path} 必须是密钥列表，或 {{keys: [...]}}"),
    "keys_entry": ("API keys file {path}, entry {number} ({name}): {problem}", "API 密钥文件 {path} 的第 {number} 个条目（{name}）：{problem}"),
    "keys_entry_unnamed": ("API keys file {path}, entry {number}: {problem}", "API 密钥文件 {path} 的第 {number} 个条目：{problem}"),
    "keys_not_parsed": ("API keys file {path} is not valid {format} (line {line}, column {column}): {problem}", "API 密钥文件 {path} 不是有效的 {format}（第 {line} 行，第 {column} 列：{problem}）"),
    "no_api_key": ("no API key is configured: set RSVC_API_KEYS or RSVC_API_KEYS_FILE (see `{command}`), or RSVC_AUTH_DISABLED=true for local development", "没有配置 API 密钥：请设置 RSVC_API_KEYS 或 RSVC_API_KEYS_FILE（见 `{command}`），本地开发可设 RSVC_AUTH_DISABLED=true"),
    "no_node": ("name at least one node, like {example}", "请至少给出一个节点，例如 {example}"),
    "not_http_url": ("{value} is not an http(s) URL (like {example})", "{value} 不是 http(s) URL（例如 {example}）"),
    "url_needs_port": ("{host} needs a port (like {example})", "{host} 需要端口（例如 {example}）"),
    "not_database_url": ("not a database URL: give SQLAlchemy's form, like {example} or {other}", "不是数据库 URL：请按 SQLAlchemy 的格式给出，例如 {example} 或 {other}"),
    # a command line's option refused (said again where Typer prints it)
    "tenant_empty": ("tenant {tenant} is empty or starts or ends with a space", "租户 {tenant} 为空，或以空格开头或结尾"),
    "tenant_not_plain": ("tenant {tenant} {why}: a tenant is a plain name (letters and digits of any script, and - _ . inside), never a pattern", "租户 {tenant} {why}：租户是普通名称（任何文字的字母和数字，中间可有 - _ .），不能是模式"),
    "may_not_contain": ("may not contain {chars}", "不能含有 {chars}"),
    "must_start_alnum": ("must start with a letter or digit", "必须以字母或数字开头"),
    "tenant_too_long": ("tenant {tenant}… is too long to name its index ({max} characters once written as an index name: a-z and 0-9 count one, other characters three per UTF-8 byte)", "租户 {tenant}… 太长，无法作为索引名（写成索引名后最多 {max} 个字符：a-z 和 0-9 各算一个，其他字符每个 UTF-8 字节算三个）"),
    "before_year_one": ("{value} reaches back before the year 1", "{value} 早于公元 1 年"),
    "since_shape": ("{value}: say 7d, 24h, 30m or an ISO date", "{value}：请写 7d、24h、30m 或 ISO 日期"),
    "page_too_far": ("--page × --limit reaches past {max} events: narrow --since", "--page × --limit 超过了 {max} 个事件：请缩小 --since"),
    "not_interval": ("{value} is not an interval such as 15m, 1h or 90s", "{value} 不是时间间隔，例如 15m、1h 或 90s"),
    "events_folder": ("--events is for a bucket: a folder's events are its own", "--events 只用于存储桶：文件夹的事件由它自己产生"),
    "events_share": ("--events is for a bucket: a share's events are its own", "--events 只用于存储桶：共享的事件由它自己产生"),
    "events_oss": ("--events reads an SQS queue: for OSS, let EventBridge push its events to --listen, or let the re-listing alone find changes ({doc})", "--events 读取的是 SQS 队列：对于 OSS，请让 EventBridge 把事件推送到 --listen，或只靠重新列举发现变化（{doc}）"),
    "line_not_json": ("{path}:{number}: not JSON ({problem})", "{path}:{number}：不是 JSON（{problem}）"),
    "line_needs_path": ("{path}:{number}: needs an object with a 'path' string", "{path}:{number}：需要一个带 'path' 字符串的对象"),
    "roles_tag_empty": ("--roles-tag is empty: name the object tag that holds roles", "--roles-tag 为空：请写出存放角色的对象标签"),
    "roles_tag_scheme": ("--roles-tag reads object tags, which {source} has none of: use it with s3:// or oss://, and --acl-rules for a folder", "--roles-tag 读取对象标签，而 {source} 没有对象标签：请用于 s3:// 或 oss://，文件夹请用 --acl-rules"),
    "share_sidecars": ("--share-sidecars is for an smb:// share: a folder's or a bucket's sidecars are always read", "--share-sidecars 只用于 smb:// 共享：文件夹和存储桶的附属文件总会读取"),
    "shard_form": ("--shard {text} is not I/N (the shard's index from 0, the count)", "--shard {text} 不是 I/N 的形式（分片序号从 0 起，分片总数）"),
    "shard_count": ("--shard {text}: the count must be 1 to {max}", "--shard {text}：分片总数必须是 1 到 {max}"),
    "shard_index": ("--shard {text}: the index must be 0 to {max}", "--shard {text}：分片序号必须是 0 到 {max}"),
    "shard_env": ("JOB_COMPLETION_INDEX and RSVC_INDEXER_SHARDS go together (an indexed Job sets the first, its completions count is the second)", "JOB_COMPLETION_INDEX 和 RSVC_INDEXER_SHARDS 必须同时设置（索引化 Job 设置前者，其完成数即后者）"),
    "chunk_too_small": ("chunk size must be at least {n} characters", "分段大小至少应为 {n} 个字符"),
    "chunk_overlap": ("overlap must be non-negative and under half the chunk size", "重叠不能为负，且必须小于分段大小的一半"),
    "map_columns": ("expected id,person ({n} columns)", "应为 id,person（{n} 列）"),
    "map_too_many": ("{file}: more than {n} ids", "{file}：超过 {n} 个 ID"),
    # the embedding server (retrieval_svc.embedding)
    "embed_unreachable": ("embedding server {url} unreachable: {why}", "嵌入服务 {url} 连不上：{why}"),
    "embed_timeout": ("embedding server {url} did not answer in time", "嵌入服务 {url} 没有及时应答"),
    "embed_http": ("embedding server {url} answered HTTP {status}", "嵌入服务 {url} 返回 HTTP {status}"),
    "embed_unreadable": ("embedding server {url} sent an unreadable answer", "嵌入服务 {url} 的应答无法读取"),
    "embed_count": ("embedding server {url} sent {n} vectors for {m} texts", "嵌入服务 {url} 为 {m} 段文本返回了 {n} 个向量"),
    "after_tries": ("{what} (after {n} tries)", "{what}（尝试 {n} 次后）"),
    "not_yaml": ("{path} is not valid YAML (line {line}, column {column}): {problem}", "{path} 不是有效的 YAML（第 {line} 行，第 {column} 列：{problem}）"),
    # a rules file (indexer.permissions.rules)
    "rules_over_limit": ("{path} is over the limit of {max} bytes", "{path} 超过了 {max} 字节的上限"),
    "rules_not_mapping": ("{path} must be a mapping with 'unmatched' and 'rules'", "{path} 必须是含有 'unmatched' 和 'rules' 的映射"),
    "rules_unmatched": ("{path} must say what an object no rule matches gets: 'unmatched: refuse' (it fails, nothing is published) or 'unmatched: public'", "{path} 必须写明没有规则匹配的对象如何处理：'unmatched: refuse'（失败，不发布任何内容）或 'unmatched: public'"),
    "rules_no_default": ("there is no default, so a new folder never goes public by accident", "没有默认值，这样新文件夹绝不会意外公开"),
    "rules_roles_unreadable": ("{where}: access_roles cannot be read: {why}", "{where}：无法读取 access_roles：{why}"),
    "not_utf8": ("{path} is not UTF-8 text", "{path} 不是 UTF-8 文本"),
    "rule_shadowed": ("{later} can never match: {earlier} comes first and matches everything it does (the first matching rule wins: move it up)", "{later} 永远不会匹配：{earlier} 在它前面，且匹配它能匹配的一切（第一条匹配的规则生效：请把它移到前面）"),
    # a path Typer checks (click's words)
    "file_missing": ("file {name} does not exist.", "文件 {name} 不存在。"),
    "directory_missing": ("directory {name} does not exist.", "文件夹 {name} 不存在。"),
    "path_missing": ("path {name} does not exist.", "路径 {name} 不存在。"),
    "file_is_directory": ("file {name} is a directory.", "{name} 是文件夹，不是文件。"),
    "directory_is_file": ("directory {name} is a file.", "{name} 是文件，不是文件夹。"),
    # the directory sync's file and bind (retrieval_svc.directory)
    "policy_db_failed": ("policy database {url}: {why}", "策略数据库 {url}：{why}"),
    "cannot_read": ("cannot read {path}: {why}", "无法读取 {path}：{why}"),
    "sync_no_roles": ("the sync maps no group to a role: add 'roles' or 'all_groups'", "同步没有把任何组映射到角色：请添加 'roles' 或 'all_groups'"),
    "bind_password_unset": ("the bind password: ${env} is not set", "绑定密码：${env} 未设置"),
    "the_file": ("the file", "文件本身"),
    # a policy line (retrieval_svc.acl.policy_store)
    "p_line_shape": ("a p line must be: p, subject, tenant, knowledge_id, read", "p 行必须是：p, subject, tenant, knowledge_id, read"),
    "g_line_shape": ("a g line must be: g, member, role, tenant", "g 行必须是：g, member, role, tenant"),
    "line_type": ("unknown line type {ptype} (p or g)", "未知的行类型 {ptype}（应为 p 或 g）"),
    "only_read": ("the only action is 'read'", "唯一的操作是 'read'"),
    "user_not_role": ("a user cannot be a role", "用户不能是角色"),
    "anyone_not_role": ("'anyone' is every principal, never a role", "'anyone' 表示所有主体，永远不是角色"),
    "does_not_exist": ("{path} does not exist", "{path} 不存在"),
    # an operating system's reason (strerror), as a problem's value
    "os_no_such_file": ("No such file or directory", "没有这个文件或文件夹"),
    "os_permission": ("Permission denied", "没有权限"),
    "os_is_a_directory": ("Is a directory", "是文件夹"),
    "os_not_a_directory": ("Not a directory", "不是文件夹"),
    "os_refused": ("Connection refused", "连接被拒绝"),
    # an index whose vectors are another model's (retrieval_svc.search.index)
    "model_mismatch": ("index {index} behind alias {alias} holds vectors of {model} ({dims} dimensions), but this process is configured for {wanted} ({wanted_dims} dimensions). Mixing vector spaces would return nonsense: run `retrieval-indexer rebuild` with the new embedder settings (it re-embeds every chunk into a new index and swaps the alias), or set RSVC_EMBEDDER and RSVC_EMBEDDING_* back to the index's model.", "别名 {alias} 下的索引 {index} 存放的是 {model} 的向量（{dims} 维），而本进程配置的是 {wanted}（{wanted_dims} 维）。混用向量空间只会返回无意义的结果：请用新的嵌入模型设置运行 `retrieval-indexer rebuild`（它把每个分块重新嵌入到新索引并切换别名），或把 RSVC_EMBEDDER 和 RSVC_EMBEDDING_* 改回该索引的模型。"),
    "model_mismatch_no_vectors": ("index {index} behind alias {alias} holds no vectors, but this process is configured for {wanted} ({wanted_dims} dimensions). Mixing vector spaces would return nonsense: run `retrieval-indexer rebuild` with the new embedder settings (it re-embeds every chunk into a new index and swaps the alias), or set RSVC_EMBEDDER to none.", "别名 {alias} 下的索引 {index} 没有向量，而本进程配置的是 {wanted}（{wanted_dims} 维）。混用向量空间只会返回无意义的结果：请用新的嵌入模型设置运行 `retrieval-indexer rebuild`（它把每个分块重新嵌入到新索引并切换别名），或把 RSVC_EMBEDDER 设为 none。"),
}  # fmt: skip

# The names a problem gives what it is about.
WHAT_ZH = {
    "tenant": "租户", "user id": "用户 ID", "subject": "主体", "knowledge ids": "知识库 ID",
    "role": "角色", "parent role": "父角色", "id": "ID", "group displayName": "组 displayName",
    "group": "组", "a control character": "控制字符", "a lone surrogate": "孤立代理项",
    "a line separator": "行分隔符", "a paragraph separator": "段落分隔符",
}  # fmt: skip
