"""What the command lines print, in the reader's language (issue #58 §3): English, or Chinese
under a Chinese locale (``LANG=zh_CN.UTF-8``, ``LC_ALL``/``LC_MESSAGES``, or ``RSVC_LANG=zh``).

Each line a command prints has a row here, its English and its Chinese with the same named
values; the reasons it carries (why a document failed, why a file was passed over, what set
its roles) come from ``retrieval_svc.reasons``, the table the console uses.
``tests/unit/test_words.py`` holds every row to both languages and the commands to the rows.
JSON output (``--json``) never changes: it is for programs.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from retrieval_svc.bench_words import BENCH
from retrieval_svc.causes import CAUSES
from retrieval_svc.log_words import LOGS
from retrieval_svc.problem_words import PROBLEMS, WHAT_ZH
from retrieval_svc.reasons import failure_text, passed_over_text, roles_source_text
from retrieval_svc.validation_words import chinese_of

LINES: dict[str, tuple[str, str]] = {
    # retrieval-indexer index
    "indexed": ("{verb} {documents} documents ({chunks} chunks{embedded}) in {seconds} s", "{verb} {documents} 个文档（{chunks} 个分段{embedded}），用时 {seconds} 秒"),
    "verb_indexed": ("indexed", "已索引"),
    "verb_would_index": ("would index", "将索引"),
    "embedded": (", {n} embedded", "，{n} 个已生成向量"),
    "retagged": ("{n} re-tagged (roles changed, text not: not re-embedded), ", "{n} 个重新标注角色（角色变了、文本没变：不重新生成向量），"),
    "skipped": ("skipped {skipped} unchanged, {retagged}{failed} failed, {pruned} pruned, {withdrawn} withdrawn, {stale} stale chunks removed", "跳过 {skipped} 个未变文档，{retagged}{failed} 个失败，{pruned} 个已清除，{withdrawn} 个已撤下，删除 {stale} 个过期分段"),
    "seen": ("{seen} documents seen, {bytes} bytes read", "共见到 {seen} 个文档，读取 {bytes} 字节"),
    "passed_over": ("passed over {total}: {reasons}", "略过 {total} 个：{reasons}"),
    "failed_item": ("  failed {document}: {reason}", "  失败 {document}：{reason}"),
    "passed_over_item": ("  passed over {count}: {reason} ({examples})", "  略过 {count} 个：{reason}（{examples}）"),
    "fail_closed": ("  refused to every person {count}: a deny names {sid}, a SID no directory sync read (fail closed; {examples})", "  对所有人拒绝 {count} 个：拒绝项指向 {sid}，目录同步未读取该 SID（失败即关闭；{examples}）"),
    "need_libreoffice": ("{n} failed for want of LibreOffice ({suffixes}): {install}", "{n} 个因缺少 LibreOffice 而失败（{suffixes}）：{install}"),
    "not_pruned": ("not pruned: the listing did not complete (what it did not reach is unknown, not gone)", "未清除：列举没有完成（没列到的文件是未知，不是已删除）"),
    "pruned_own": ("pruned what {source} no longer holds (its own documents: other sources' stay)", "已清除 {source} 中已不存在的文档（只清除它自己写入的：其他数据源的保留）"),
    "pruned_asked": ("pruned as asked (--prune): the knowledge base holds what {source} holds, whichever source wrote the rest", "按要求清除（--prune）：知识库只保留 {source} 中有的文档，不论其余文档由哪个数据源写入"),
    "not_pruned_dry": ("not pruned: a dry run", "未清除：试运行"),
    "not_pruned_asked": ("not pruned (--no-prune)", "未清除（--no-prune）"),
    # retrieval-indexer watch
    "settled": ("{at} {what}: {looked} looked at, {deleted} deleted and {held} held at once, {indexed} indexed, {retagged} re-tagged, {failed} failed", "{at} {what}：查看 {looked} 个，立即删除 {deleted} 个、暂停 {held} 个，索引 {indexed} 个，重新标注 {retagged} 个，失败 {failed} 个"),
    "what_events": ("events", "事件"),
    "what_relisting": ("re-listing", "重新列举"),
    "what_rules": ("rules edit", "规则变更"),
    "event_rejected": ("an event message could not be read ({reason}): {where}; dropped, the re-listing covers it", "有一条事件消息无法读取（{reason}）：{where}；已丢弃，由重新列举兜底"),
    "event_too_large": ("larger than the limit", "超过大小上限"),
    "event_too_deep": ("nested deeper than the limit", "嵌套层数超过上限"),
    "event_not_json": ("not JSON", "不是 JSON"),
    "event_not_an_event": ("not a bucket event", "不是存储桶事件"),
    "event_too_many_records": ("more records than the limit", "记录数超过上限"),
    "event_bad_record": ("a record names no bucket and key", "有一条记录没有给出存储桶和对象键"),
    "event_refusals_quiet": ("more than {n} pushed requests refused in {seconds} s: the rest this while are counted (rsvc_watch_rejected_total, the status record), not logged one by one", "{seconds} 秒内被拒绝的推送请求超过 {n} 个：这段时间里其余的只计数（rsvc_watch_rejected_total、状态记录），不再逐条写日志"),
    "event_mns_stale": ("an MNS delivery dated more than 15 minutes from this host's clock, or undated", "MNS 推送的日期与本机时钟相差超过 15 分钟，或没有日期"),
    "event_mns_bad_signature": ("an MNS delivery whose signature does not verify (or whose body is not the one signed)", "MNS 推送的签名验证不通过（或正文不是被签名的那份）"),
    "event_mns_cert_refused": ("an MNS delivery whose signing certificate is not at https on an allowed host", "MNS 推送的签名证书地址不是允许主机上的 https 地址"),
    "event_mns_cert_unavailable": ("an MNS delivery whose signing certificate could not be fetched now (answered 503: MNS tries again)", "MNS 推送的签名证书暂时无法获取（已回复 503：MNS 会重试）"),
    "event_mns_replayed": ("an MNS delivery already taken, sent again (a replay)", "已接收过的 MNS 推送被再次发送（重放）"),
    "event_mns_cert_expired": ("an MNS delivery whose signing certificate is expired or not yet valid by this host's clock (5 minutes' skew allowed)", "MNS 推送的签名证书按本机时钟已过期或尚未生效（允许 5 分钟偏差）"),
    "watching": ("watching {source}: /metrics, /healthz, /readyz on port {port}", "正在监视 {source}：/metrics、/healthz、/readyz 在端口 {port}"),
    "rules_not_recorded": ("the rules change was not recorded in the permission history: {why}", "规则变更没有记入权限历史：{why}"),
    "run_not_kept": ("the run's record for the console not kept: {why}", "本次运行给控制台的记录没有保存：{why}"),
    "bulk_item_failed": ("bulk item failed: {why}", "批量写入的一项失败：{why}"),
    "hold_failed": ("holding chunk {chunk} failed (it answers as before until written again): {why}", "扣住分段 {chunk} 失败（在重新写入之前，它照旧回答）：{why}"),
    "refresh_retrying": ("refresh of {index}: a shard copy is unavailable; retrying", "刷新 {index}：有分片副本不可用；重试"),
    "sids_unknown": ("{why}: every deny naming a SID not well-known refuses every person", "{why}：凡拒绝项指向非知名 SID 的，一律对所有人拒绝"),
    "warning": ("warning: {what}", "警告：{what}"),
    "listening": ("listening for pushed events on {address}", "正在 {address} 上接收推送的事件"),
    "listen_folder": ("--listen is for a bucket: a folder's events are its own", "--listen 只用于存储桶：文件夹的事件由它自己产生"),
    "listen_or_events": ("give --listen or --events, not both", "--listen 和 --events 只能给一个"),
    "listen_token": ("--listen needs a token: set RSVC_WATCH_LISTEN_TOKEN or --listen-token-file (senders send it as Authorization: Bearer TOKEN), or --listen-mns for MNS's signed push alone", "--listen 需要令牌：设置 RSVC_WATCH_LISTEN_TOKEN 或 --listen-token-file（发送方以 Authorization: Bearer TOKEN 发送），或只接收 MNS 签名推送时用 --listen-mns"),
    "listen_mns_alone": ("--listen-mns verifies what --listen receives: give --listen HOST:PORT too", "--listen-mns 校验 --listen 收到的推送：请同时给出 --listen HOST:PORT"),
    "listen_mns_ca": ("RSVC_WATCH_MNS_CA_FILE {path}: no such file", "RSVC_WATCH_MNS_CA_FILE {path}：文件不存在"),
    "listen_address": ("--listen {spec}: give HOST:PORT, :PORT or PORT (e.g. :9465)", "--listen {spec}：请给出 HOST:PORT、:PORT 或 PORT（例如 :9465）"),
    "listen_unavailable": ("--listen {spec}: cannot listen there ({why})", "--listen {spec}：无法在此监听（{why}）"),
    "lease_waiting": ("{holder} ({role}, host {host}, process {pid}) holds the lease of {source}: waiting for it", "{holder}（{role}，主机 {host}，进程 {pid}）持有 {source} 的租约：等待它"),
    "lease_takeover": ("{source}: this writer's predecessor (host {host}, process {pid}) is gone: its lease taken over at once", "{source}：本写入者的前任（主机 {host}，进程 {pid}）已不在：立即接管它的租约"),
    "lease_not_taken": ("error: {holder} ({role}, host {host}) kept the lease of {source} for {seconds} s: nothing written. Run again when it is done, or give --lease-wait more time", "错误：{holder}（{role}，主机 {host}）持有 {source} 的租约已 {seconds} 秒：什么都没写。等它结束后再运行，或把 --lease-wait 调长"),
    "lease_lost_run": ("error: {why}: the run stopped before writing more (what it wrote stays; run it again)", "错误：{why}：本次运行已停止，不再写入（已写入的保留；请再运行一次）"),
    "lease_not_read": ("the lease of {source} could not be read ({why}): trying again", "无法读取 {source} 的租约（{why}）：重试"),
    "lease_taken": ("the lease of {source} was taken by {holder}", "{source} 的租约已被 {holder} 取得"),
    "watch_wanted": ("an index run of {source} waits for the lease", "{source} 的一次 index 运行在等待租约"),
    "watch_aside": ("{why}: this watcher stepped aside (what it heard is kept) and takes the lease again once the run is over", "{why}：本监视进程已让出（听到的变化都保留），运行结束后重新取得租约"),
    "watch_since_kept": ("{now} since the listing kept at {at}: {keys} keys changed{rules}; settling them before the whole listing", "{now} 自 {at} 保存的清单以来：{keys} 个键有变化{rules}；先处理它们，再完整列举"),
    "watch_since_rules": (", and the rules file", "，规则文件也有变化"),
    "watch_lost": ("{why}: this watcher stops writing and waits for the lease again (what it heard is kept)", "{why}：本监视进程停止写入，重新等待租约（听到的变化都保留）"),
    "events_stopped": ("events stopped ({kind}: {why}); listening again", "事件中断（{kind}：{why}）；重新开始接收"),
    "rules_not_reloaded": ("rules or manifest not reloaded: {why}; the rules in force stay", "规则或清单没有重新加载：{why}；生效中的规则保持不变"),
    "rules_changed": ("the rules or the manifest changed: settling everything", "规则或清单变了：全部重新处理"),
    "notifications_stopped": ("change notifications of {source} stopped ({kind}); again in {seconds} s", "{source} 的变更通知中断（{kind}）；{seconds} 秒后重试"),
    "rules_edit_not_held": ("a rules edit not held from the index ({why}): trying again", "一次规则变更没能从索引中暂停（{why}）：稍后重试"),
    "settle_failed": ("settle failed ({why}); trying again in {seconds} s", "处理失败（{why}）；{seconds} 秒后重试"),
    "listing_not_read": ("the last listing kept could not be read ({why}): re-listing whole", "保存的上次列举无法读取（{why}）：完整重新列举"),
    "listing_not_kept": ("the listing was not kept ({kind}: {why})", "列举没有保存（{kind}：{why}）"),
    "listing_kept_not_read": ("the listing kept was not read ({kind}: {why})", "保存的列举没有读取（{kind}：{why}）"),
    "es_not_answering": ("Elasticsearch does not answer ({why}): changes are kept and settled once it does", "Elasticsearch 没有应答（{why}）：变化都保留，等它应答后再处理"),
    "es_answering": ("Elasticsearch answers again", "Elasticsearch 已恢复应答"),
    "root_replaced": ("the folder {root} was replaced (another device or inode): watched again and re-listed whole", "文件夹 {root} 被替换了（设备号或 inode 变了）：重新监视并完整重新列举"),
    "root_gone": ("the folder {root} is {why}: nothing below it is heard; re-listed once it is back", "文件夹 {root} {why}：听不到它下面的变化；恢复后完整重新列举"),
    "doc_line": ("  {name}  [{format}{pages}{ocr}] {chunks} chunk{s}{roles} — {title}  ({id})", "  {name}  [{format}{pages}{ocr}] {chunks} 个分段{roles} — {title}  （{id}）"),
    "pages": (", {n} page{s}", "，{n} 页"),
    "ocr_pages": (", {n} by OCR", "，其中 {n} 页经 OCR"),
    # retrieval-indexer init
    "index_ready": ("index alias {alias} ready (analysis: {analysis})", "索引别名 {alias} 已就绪（分析器：{analysis}）"),
    # retrieval-indexer show
    "kb_documents": ("{kb}: {total} documents{more}", "{kb}：{total} 个文档{more}"),
    "first_shown": (" (the first {n} shown)", "（只显示前 {n} 个）"),
    "from_source": ("  from {source}: {n} documents", "  来自 {source}：{n} 个文档"),
    "legacy_source": ("(written before sources were recorded)", "（记录数据源之前写入）"),
    "restricted": (", restricted", "，受限"),
    "lease_line": ("  {source} is written by {holder} ({role}, host {host}, process {pid}), lease until {until}", "  {source} 由 {holder} 写入（{role}，主机 {host}，进程 {pid}），租约到 {until}"),
    "last_run_removed": ("  last run: {pruned} pruned (the source no longer holds them), {withdrawn} withdrawn (their roles could no longer be decided, or changed while they failed: see their failures)", "  上次运行：清除 {pruned} 个（数据源里已没有），撤下 {withdrawn} 个（角色无法确定，或在失败期间发生了变化：见各自的失败原因）"),
    # retrieval-svc sync-ldap
    "synced": ("synced: added {added}, removed {removed}; {grants} grants from {read}", "已同步：新增 {added}，移除 {removed}；{grants} 条授权，来自 {read}"),
    "read_from": ("{users} users, {groups} groups from {url}", "{url} 的 {users} 个用户、{groups} 个组"),
    "bind_refused": ("error: {url}: the directory refused the bind as {who} (invalidCredentials): check bind_dn and the password in ${env}; nothing changed", "错误：{url}：目录拒绝以 {who} 绑定（invalidCredentials）：请检查 bind_dn 和 ${env} 中的密码；什么都没改"),
    "error_map_unchanged": ("error: {what}; the map is unchanged", "错误：{what}；映射未改变"),
    "error_db_unchanged": ("error: {what}; the database is unchanged", "错误：{what}；数据库未改变"),
    "nothing_to_delete": ("no chunks of {tenant}/{kb} match; nothing to delete", "{tenant}/{kb} 中没有匹配的分段；没有可删除的"),
    "nothing_deleted": ("{n} chunks match; nothing deleted (pass --yes to delete them)", "{n} 个分段匹配；什么都没删（加 --yes 才会删除）"),
    "deleted_chunks": ("deleted {n} chunks", "已删除 {n} 个分段"),
    "no_document": ("no document {document} in {tenant}/{kb}", "{tenant}/{kb} 中没有文档 {document}"),
    "history_no_db": ("error: the history is in the policy database: set RSVC_CASBIN_DB_URL or --db", "错误：历史记录在策略数据库里：请设置 RSVC_CASBIN_DB_URL 或 --db"),
    "metrics_not_exported": ("warning: could not export metrics: {why}", "警告：无法导出指标：{why}"),
    "no_rules": ("no rules", "没有规则"),
    "no_rules_in": ("no rules in tenant {tenant}", "租户 {tenant} 中没有规则"),
    "deleted_row": ("deleted row {row}: {line}", "已删除第 {row} 行：{line}"),
    "error_nothing_changed": ("error: {what}; nothing changed", "错误：{what}；什么都没改"),
    "sync_skipped": ("skipped: {what}", "已跳过：{what}"),
    "no_longer_given": ("; no longer given by the directory: {roles}", "；目录已不再授予：{roles}"),
    "entries_skipped": ("; {n} entries skipped", "；跳过 {n} 个条目"),
    "ids_known": ("; ids people are known by: +{added} -{removed}", "；人员的别名 ID：+{added} -{removed}"),
    "sids_held": ("; SIDs: {people} people hold {sids} known SIDs (one row a person)", "；SID：{people} 人持有已知的 {sids} 个 SID（每人一行）"),
    "read_changed": (" ({n} entries read: what changed since the last sync, by syncrepl)", "（读取 {n} 个条目：自上次同步以来变化的部分，经 syncrepl）"),
    "unclaimed_sync": ("note: ldap:{old} gives grants of this sync's roles and has not run since this sync first did: if {old} was this sync's old name, add 'renamed_from: {old}' to the file (its grants are then this sync's to keep or remove)", "提示：ldap:{old} 授予了本同步的角色，且自本同步首次运行以来没有运行过：如果 {old} 是本同步的旧名称，请在文件中加上 'renamed_from: {old}'（它的授权随后由本同步保留或移除）"),
    "read_changed_usn": (" ({n} entries read: what changed since the last sync, by uSNChanged)", "（读取 {n} 个条目：自上次同步以来变化的部分，经 uSNChanged）"),
    "read_whole_because": (" (read whole: {reason})", "（完整读取：{reason}）"),
    "disabled_left_out": (", {n} disabled accounts left out", "，{n} 个已停用账户未计入"),
    "syncrepl_unavailable": ("note: the directory cannot say what changed ({reason}); each sync reads it whole", "提示：目录无法告知变化了什么（{reason}）；每次同步都完整读取"),
    "unchanged_directory": ("unchanged: the directory's {stamp} is as at the last sync", "未变化：目录的 {stamp} 与上次同步时相同"),
    # retrieval-svc policy, identity
    "policy_done": ("done: {what}", "已完成：{what}"),
    "policy_unchanged": ("unchanged (already so): {what}", "未变化（本来就是如此）：{what}"),
    "policy_no_db": ("error: which policy database? Set RSVC_CASBIN_DB_URL or pass --db (e.g. sqlite:///policy.db) before the command", "错误：用哪个策略数据库？请设置 RSVC_CASBIN_DB_URL，或在子命令前加 --db（例如 sqlite:///policy.db）"),
    "policy_skipped": ("{n} stored lines skipped; remove one with `retrieval-svc policy delete ROW`, or fix it at its source", "{n} 行已存储的策略被跳过；用 `retrieval-svc policy delete ROW` 删除，或在它的来源处修正"),
    "policy_all_in_force": ("every stored line is in force", "所有已存储的策略行都已生效"),
    "policy_no_row": ("error: there is no row {row}", "错误：没有第 {row} 行"),
    "owner_grant": ("role {role!r} of tenant {tenant!r} is owned by the directory sync {owner!r}: it decides who holds it, so {source} may not give it. Add the person to a group that gives the role in the directory (or map another group to it)", "租户 {tenant!r} 的角色 {role!r} 归目录同步 {owner!r} 所有：由它决定谁持有，{source} 不能授予。请在目录中把此人加入给予该角色的组（或把另一个组映射到它）"),
    "owner_inherit": ("role {role!r} of tenant {tenant!r} is owned by the directory sync {owner!r}: {member!r} may not inherit it (its holders would hold it without being in the directory's group). Map a group to it in the directory instead", "租户 {tenant!r} 的角色 {role!r} 归目录同步 {owner!r} 所有：{member!r} 不能继承它（否则其持有者不在目录的组里也会持有它）。请改为在目录中把一个组映射到它"),
    "owner_kept": ("{member} holds {role!r} in {tenant!r} through {givers}: that source gives it and takes it back (remove them from the group there){done}", "{member} 在 {tenant!r} 中经由 {givers} 持有 {role!r}：由该来源授予和收回（请在那里把其移出组）{done}"),
    "owner_nothing_changed": ("; nothing changed", "；未做任何修改"),
    "owner_hand_gone": ("; the hand grant is gone", "；手工授权已撤销"),
    "change_holds": ("{user} holds {role} in {tenant}", "{user} 在 {tenant} 中持有 {role}"),
    "change_no_longer_holds": ("{user} no longer holds {role} in {tenant}", "{user} 在 {tenant} 中不再持有 {role}"),
    "change_inherits": ("{role} inherits {parent} in {tenant}", "{role} 在 {tenant} 中继承 {parent}"),
    "change_no_longer_inherits": ("{role} no longer inherits {parent} in {tenant}", "{role} 在 {tenant} 中不再继承 {parent}"),
    "change_may_read": ("{subject} may read {knowledge_ids} in {tenant}", "{subject} 可以读取 {tenant} 中的 {knowledge_ids}"),
    "change_may_no_longer_read": ("{subject} may no longer read {knowledge_ids} in {tenant}", "{subject} 不能再读取 {tenant} 中的 {knowledge_ids}"),
    "policy_imported": ("imported {n} rules from {file}", "已从 {file} 导入 {n} 条规则"),
    "identity_map": ("identity map of {tenant}: +{added} -{removed} from {file}", "{tenant} 的身份映射：+{added} -{removed}，来自 {file}"),
    "resolved": ("{status}: {person}{via}; roles: {roles}", "{status}：{person}{via}；角色：{roles}"),
    "status_none": ("none", "无身份"),
    "status_known": ("known", "已知"),
    "status_alias": ("alias", "别名"),
    "status_unknown": ("unknown", "未知"),
    "status_ambiguous": ("ambiguous", "有歧义"),
    "resolved_via": (" via {how}", "，经由 {how}"),
    # errors every command may print
    "error": ("error: {what}", "错误：{what}"),
    "es_unreachable": ("error: Elasticsearch at {url} is unreachable ({cause}). Start the local one with `scripts/es.sh start`, or point RSVC_ES_URL at your cluster.", "错误：连不上 {url} 上的 Elasticsearch（{cause}）。请用 `scripts/es.sh start` 启动本地的，或把 RSVC_ES_URL 指向你的集群。"),
    "embedder_error": ("error: {what} (RSVC_EMBEDDER={embedder})", "错误：{what}（RSVC_EMBEDDER={embedder}）"),
    "es_refused": ("error: Elasticsearch at {url} refused the request: {status} {error} ({message}). --debug shows the details.", "错误：{url} 上的 Elasticsearch 拒绝了请求：{status} {error}（{message}）。加 --debug 可看详情。"),
    "writes_to": ("Elasticsearch at {cluster}: indices under alias {alias}, installation {installation}", "Elasticsearch 位于 {cluster}：索引在别名 {alias} 之下，本安装为 {installation}"),
    "foreign_indices": ("{index} under alias {alias} at {cluster} belongs to another installation, {owner} (this one is {ours}): nothing was written. Use an Elasticsearch of your own (`scripts/es.sh start` picks a free port) or another RSVC_INDEX_ALIAS; to take these indices over on purpose, run once with RSVC_INSTALLATION_ADOPT=true; to be that same installation, set RSVC_INSTALLATION_ID={owner}", "{cluster} 上别名 {alias} 之下的 {index} 属于另一个安装 {owner}（本安装为 {ours}）：什么都没写。请使用你自己的 Elasticsearch（`scripts/es.sh start` 会选一个空闲端口）或另一个 RSVC_INDEX_ALIAS；如果确实要接管这些索引，用 RSVC_INSTALLATION_ADOPT=true 运行一次；如果本来就是同一个安装，请设置 RSVC_INSTALLATION_ID={owner}"),
    "serves_tenants": ("{writes_to}; tenants {tenants}", "{writes_to}；租户 {tenants}"),
    "progress_reading": ("reading {source}", "读取 {source}"),
    "progress_embedding": ("embedding ({model})", "生成向量（{model}）"),
    "progress_documents": ("documents", "个文档"),
    "progress_chunks": ("chunks", "个分段"),
    "not_a_folder": ("{path} is not a folder", "{path} 不是文件夹"),
    "rules_error": ("error: --acl-rules: {why}", "错误：--acl-rules：{why}"),
    "configuration_error": ("configuration error: {what}", "配置错误：{what}"),
    "setting_not_json": ("{name}: the value is not valid JSON ({problem})", "{name}：值不是有效的 JSON（{problem}）"),
    # retrieval-svc new-key
    "new_key": ("API key (shown once, give it to the caller): {secret}", "API 密钥（只显示这一次，请交给调用方）：{secret}"),
    "new_key_secret": ("token secret (in the entry below; your backend signs principal tokens with it, HS256): keep the entry in a Secret", "令牌密钥（在下面的条目里；你的后端用它签发主体令牌，HS256）：请把这个条目保存在 Secret 中"),
    "new_key_oidc": ("oidc mode: the service verifies the end user's token with your identity provider; set RSVC_OIDC_ISSUER and RSVC_OIDC_AUDIENCE (docs/permissions.md)", "oidc 模式：服务向你的身份提供方验证最终用户的令牌；请设置 RSVC_OIDC_ISSUER 和 RSVC_OIDC_AUDIENCE（docs/permissions.zh-CN.md）"),
    "for_dify": ("for Dify: unknown_user and anonymous refuse, so a wrong or missing binding fails on its first request (Dify's API server log and the console's Knowledge bases page show it); bind user_id to {{{{#sys.user_id#}}}} (docs/dify.md)", "用于 Dify：unknown_user 与 anonymous 都为 refuse，绑定错了或没绑定，第一个请求就会失败（Dify API 服务的日志和控制台的“知识库”页会显示）；请把 user_id 绑定到 {{{{#sys.user_id#}}}}（docs/dify.zh-CN.md）"),
    "for_dify_shape": ("no --user-id-shape: any id that names someone is taken; name the shape your app's backend sends as Dify's user (email, uuid, directory_uid, regex:...) so a typed name fails loudly", "未指定 --user-id-shape：任何能对应到人员的 ID 都会被接受；请写明应用后端作为 Dify 用户发送的 ID 格式（email、uuid、directory_uid、regex:...），这样手输的名字会明确失败"),
    "would_add": ("dry run: would add {added}, remove {removed} ({read})", "试运行：将新增 {added}，移除 {removed}（{read}）"),
}  # fmt: skip

PROBLEMS.update(CAUSES)  # (why a connection failed: retrieval_svc.causes)
LINES.update(PROBLEMS)
LINES.update(LOGS)  # (what the service's log says: retrieval_svc.log_words)
LINES.update(BENCH)  # (what the benchmarks print: retrieval_svc.bench_words)
# Problems whose values may themselves hold "; " (a list of entries): said again whole,
# before a text is split into the problems it joins.
WHOLE = ("user_id_shared",)


def problem(text: object, lang: str | None = None) -> str:
    """A refusal of ``PROBLEMS`` (several joined by "; ") in ``lang``; as it is in English,
    or when of no known shape."""
    text = str(text)
    if (lang or cli_language()) != "zh":
        return text
    if (said := again(text, *WHOLE, lang="zh")) != text:
        return said
    return "；".join(_problem_zh(part) for part in text.split("; "))


# The values a problem counts with: a match whose count is not a number is another shape.
_COUNTS = {"number", "line", "column", "n"}
_COUNT = re.compile(r"[\d,?]+")

# A rules file's rule as a problem names it: ``rule 2`` or ``rule 2 (finance/**)``.
_RULE = re.compile(r"rule (\d+)(?: \((.*)\))?", re.S)


def _what_zh(text: str) -> str:
    """A value of a problem: a problem itself, or a name of what it is about
    (``group 'sales'``, ``rule 2 (finance/**)``)."""
    if (rule := _RULE.fullmatch(text)) is not None:
        return f"第 {rule[1]} 条规则" + (f"（{rule[2]}）" if rule[2] is not None else "")
    if "; " in text and (parts := text.split("; ")) and any(_problem_zh(p) != p for p in parts):
        return "；".join(_what_zh(part) for part in parts)  # (several problems, one line)
    if (said := _problem_zh(text)) != text:
        return said
    for english in sorted(WHAT_ZH, key=len, reverse=True):
        if text == english or text.startswith(english + " "):
            return WHAT_ZH[english] + text[len(english) :]
    return text


def _problem_zh(text: str) -> str:
    for key in PROBLEMS:
        english = LINES[key][0]
        pattern = "".join(
            re.escape(literal) + (f"(?P<{name}>.*?)" if name else "")
            for literal, name, _, _ in string.Formatter().parse(english)
        )
        if (found := re.fullmatch(pattern, text, re.S)) is not None:
            first = found.group(1) if english.startswith("{") and found.groups() else ""
            if ": " in first:  # (a place before it, "file: rule 1: …": said apart, below)
                continue
            counts = [v for k, v in found.groupdict().items() if k in _COUNTS]
            if not all(_COUNT.fullmatch(v) for v in counts):  # ("line {number}" is a number)
                continue
            values = {k: _what_zh(v) for k, v in found.groupdict().items()}
            return say(key, "zh", **values)
    if (said := chinese_of(text)) is not None:  # (a field's problem in a file: pydantic's)
        return said
    where, colon, rest = text.partition(": ")  # (an entry's DN, a file's line before it)
    if colon and (said := _problem_zh(rest)) != rest:
        return f"{_what_zh(where)}：{said}"
    return text


# A reader other than the process's own terminal (a console page in its browser's language):
# the lines said while it is set are in its language, also on threads started meanwhile
# (``asyncio.to_thread`` copies the context).
_READER: ContextVar[str | None] = ContextVar("rsvc_reader_language", default=None)


@contextmanager
def reader_language(lang: str) -> Iterator[None]:
    """Say every line in ``lang`` (``zh`` or ``en``) within this block, whatever the locale."""
    token = _READER.set("zh" if lang.lower().startswith("zh") else "en")
    try:
        yield
    finally:
        _READER.reset(token)


def cli_language() -> str:
    """The reader's language where one is set (``reader_language``), else ``zh`` under a
    Chinese locale or ``RSVC_LANG=zh``, else ``en``."""
    reader = _READER.get()
    if reader is not None:
        return reader
    for name in ("RSVC_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def say(key: str, lang: str | None = None, **values: object) -> str:
    """Line ``key`` in ``lang`` (the command line's own when None) with ``values``."""
    english, chinese = LINES[key]
    return (chinese if (lang or cli_language()) == "zh" else english).format(**values)


def es_refused(url: str, exc: Any) -> str:
    """What Elasticsearch at ``url`` answered when it refused a call (an ``ApiError``)."""
    return say("es_refused", url=url, status=exc.meta.status, error=exc.error, message=exc.message)


def reason(text: str, lang: str | None = None) -> str:
    """A failure's reason (the indexer's English) in ``lang``."""
    return failure_text(text, lang or cli_language())


def passed_over(text: str, lang: str | None = None) -> str:
    return passed_over_text(text, lang or cli_language())


def roles_source(text: str, lang: str | None = None) -> str:
    return roles_source_text(text, lang or cli_language())


def again(text: str, *keys: str, lang: str | None = None) -> str:
    """``text``, made by the English of one of ``keys``, said again in ``lang`` (as it is
    when none made it)."""
    if (lang or cli_language()) != "zh":
        return text
    for key in keys:
        english = LINES[key][0]
        pattern = "".join(
            re.escape(literal) + (f"(?P<{name}>.*?)" if name else "")
            for literal, name, _, _ in string.Formatter().parse(english)
        )
        if (found := re.fullmatch(pattern, text, re.S)) is not None:
            return say(key, "zh", **found.groupdict())
    return text


def fields(template: str) -> set[str]:
    """The named values a line takes (``s``, the English plural's, aside)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name} - {"s"}


def plural(n: int) -> str:
    """The English plural's ``s`` for ``n`` things."""
    return "" if n == 1 else "s"
