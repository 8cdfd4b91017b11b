"""What the service writes to its log for an operator to read, as rows in English and Chinese
(the process's locale, or ``RSVC_LANG``, picks one, as for the command lines): the
``retrieval_svc.words`` table takes these rows in, ``say`` writes them.

Pure data: imports nothing.
"""

from __future__ import annotations

LOGS: dict[str, tuple[str, str]] = {
    "log_created_index": ("created index {index} behind alias {alias} (analysis: {analysis})", "已在别名 {alias} 下创建索引 {index}（分词：{analysis}）"),
    "log_metrics_on": ("metrics on http://{host}:{port}/metrics", "指标在 http://{host}:{port}/metrics"),
    "log_auth_disabled": ("AUTH IS DISABLED: every caller is trusted. Never run so in production.", "认证已关闭：信任每一个调用方。切勿在生产环境这样运行。"),
    "log_index_not_prepared": ("could not prepare the index now ({why}); /readyz will say so", "现在无法准备索引（{why}）；/readyz 会报告"),
    "log_audit_not_written": ("audit: {n} events not written ({why})", "审计：{n} 个事件没有写入（{why}）"),
    "log_query_cut": ("query of {n} characters cut to {max} (RSVC_MAX_QUERY_CHARS)", "{n} 个字符的查询被截到 {max} 个（RSVC_MAX_QUERY_CHARS）"),
    "log_embedding_failed": ("query embedding failed, answering with BM25 only: {why}", "查询向量生成失败，只用 BM25 作答：{why}"),
    "log_rerank": ("rerank {status} ({detail}): keeping the fused order", "重排 {status}（{detail}）：保留融合后的顺序"),
    "log_idp_keys": ("could not fetch the identity provider's keys (keeping {n}): {why}", "无法获取身份提供方的密钥（保留现有 {n} 个）：{why}"),
    "log_keys_reloaded": ("API keys reloaded from {path}: {n} keys (digest {digest})", "已从 {path} 重新加载 API 密钥：{n} 个（摘要 {digest}）"),
    "log_keys_file_error": ("API keys file: {why}; the keys in force stay", "API 密钥文件：{why}；生效中的密钥保持不变"),
    "log_keys_not_reloaded": ("API keys file {path} not reloaded: {why}; the keys in force stay", "API 密钥文件 {path} 没有重新加载：{why}；生效中的密钥保持不变"),
    "log_web_search": ("web search via {provider}: {detail} ({ms} ms)", "经 {provider} 的网页搜索：{detail}（{ms} 毫秒）"),
    "log_postcheck_dropped": ("ACL post-check dropped chunk {chunk} for key {api_key}: the query let it through", "ACL 事后检查为密钥 {api_key} 丢弃了分段 {chunk}：查询放过了它"),
    "log_runs_not_read": ("last runs not read: {why}", "没有读到上次运行记录：{why}"),
    "log_es_down": ("Elasticsearch is unreachable ({why}); requests answer 503 until it is back", "连不上 Elasticsearch（{why}）；在它恢复之前请求都返回 503"),
    "log_es_back": ("Elasticsearch is reachable again after {seconds} s ({n} calls failed meanwhile)", "Elasticsearch 在 {seconds} 秒后恢复可达（期间 {n} 次调用失败）"),
    "log_catalog_failed": ("field catalog refresh failed: {why}", "字段目录刷新失败：{why}"),
    "log_not_serialised": ("a query could not be serialised: {why}", "有一个查询无法序列化：{why}"),
    "log_policy_reloaded": ("policy reloaded from {source}", "已从 {source} 重新加载策略"),
    "log_policy_reload_failed": ("policy reload failed, keeping the last good policy: {why}", "策略重新加载失败，保留上一份可用的策略：{why}"),
    "log_policy_line_skipped": ("policy line skipped (a grant not given): {line}", "已跳过一行策略（未给予授权）：{line}"),
    "log_policy_more_skipped": ("policy: {n} more lines skipped; `retrieval-svc policy check`", "策略：另有 {n} 行被跳过；见 `retrieval-svc policy check`"),
    "log_session_check_failed": ("console session check failed, treating it as ended: {why}", "控制台会话检查失败，按已结束处理：{why}"),
    "log_sessions_not_forgotten": ("could not forget old console sessions now: {why}", "现在无法清除旧的控制台会话：{why}"),
}  # fmt: skip

# uvicorn's own lines about the server's life (its English exactly, the values it logs named):
# the service says each again in the reader's language (``observability.UvicornWords``).
UVICORN: dict[str, tuple[str, str]] = {
    "uvicorn_started": ("Started server process [{pid}]", "已启动服务进程 [{pid}]"),
    "uvicorn_waiting_startup": ("Waiting for application startup.", "正在等待应用启动。"),
    "uvicorn_startup_complete": ("Application startup complete.", "应用启动完成。"),
    "uvicorn_startup_failed": ("Application startup failed. Exiting.", "应用启动失败，正在退出。"),
    "uvicorn_running": ("Uvicorn running on {url} (Press CTRL+C to quit)", "Uvicorn 正在 {url} 上运行（按 CTRL+C 退出）"),
    "uvicorn_shutting_down": ("Shutting down", "正在关闭"),
    "uvicorn_waiting_connections": ("Waiting for connections to close. (CTRL+C to force quit)", "正在等待连接关闭。（按 CTRL+C 强制退出）"),
    "uvicorn_waiting_tasks": ("Waiting for background tasks to complete. (CTRL+C to force quit)", "正在等待后台任务完成。（按 CTRL+C 强制退出）"),
    "uvicorn_waiting_shutdown": ("Waiting for application shutdown.", "正在等待应用关闭。"),
    "uvicorn_shutdown_complete": ("Application shutdown complete.", "应用关闭完成。"),
    "uvicorn_shutdown_failed": ("Application shutdown failed. Exiting.", "应用关闭失败，正在退出。"),
    "uvicorn_finished": ("Finished server process [{pid}]", "服务进程 [{pid}] 已结束"),
    "uvicorn_parent_started": ("Started parent process [{pid}]", "已启动父进程 [{pid}]"),
    "uvicorn_waiting_child": ("Waiting for child process [{pid}]", "正在等待子进程 [{pid}]"),
    "uvicorn_parent_stopping": ("Stopping parent process [{pid}]", "正在停止父进程 [{pid}]"),
    "uvicorn_child_terminated": ("Terminated child process [{pid}]", "已终止子进程 [{pid}]"),
    "uvicorn_child_died": ("Child process [{pid}] died", "子进程 [{pid}] 已退出"),
    "uvicorn_sigint": ("Received SIGINT, exiting.", "收到 SIGINT，正在退出。"),
    "uvicorn_sigterm": ("Received SIGTERM, exiting.", "收到 SIGTERM，正在退出。"),
    # its port cannot be bound (the process then exits): asyncio's words, then the socket's own
    # (``serve --workers``); the commonest causes first, any other kept as the system says it
    "uvicorn_bind_in_use": ("[Errno {errno}] error while attempting to bind on address {address}: address already in use", "[Errno {errno}] 无法绑定地址 {address}：该地址已被占用（另一个进程正在监听这个端口）"),
    "uvicorn_bind_denied": ("[Errno {errno}] error while attempting to bind on address {address}: permission denied", "[Errno {errno}] 无法绑定地址 {address}：权限不足（1024 以下的端口需要特权）"),
    "uvicorn_bind_not_here": ("[Errno {errno}] error while attempting to bind on address {address}: cannot assign requested address", "[Errno {errno}] 无法绑定地址 {address}：本机没有这个地址"),
    "uvicorn_bind_failed": ("[Errno {errno}] error while attempting to bind on address {address}: {why}", "[Errno {errno}] 无法绑定地址 {address}：{why}"),
    "uvicorn_in_use": ("[Errno {errno}] Address already in use", "[Errno {errno}] 该地址已被占用（另一个进程正在监听这个端口）"),
    "uvicorn_denied": ("[Errno {errno}] Permission denied", "[Errno {errno}] 权限不足（1024 以下的端口需要特权）"),
    "uvicorn_not_here": ("[Errno {errno}] Cannot assign requested address", "[Errno {errno}] 本机没有这个地址"),
}  # fmt: skip
LOGS.update(UVICORN)
