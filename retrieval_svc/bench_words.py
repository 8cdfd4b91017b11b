"""What the benchmarks (``python -m bench.…``) print to the terminal while they run, and the
refusals they end with, as rows in English and Chinese (the terminal's locale, or
``RSVC_LANG``, picks one): the ``retrieval_svc.words`` table takes these rows in, ``say``
writes them. A benchmark's own names (its targets, scenarios, sources, result keys) are values
and stay as they are.

Pure data: imports nothing.
"""

from __future__ import annotations

BENCH: dict[str, tuple[str, str]] = {
    # what every benchmark ends with
    "bench_results": ("results in {out}", "结果在 {out}"),
    # python -m bench.relevance (scripts/test's relevance smoke shows these)
    "relevance_read": ("relevance: {paragraphs} paragraphs, {questions} questions", "相关性：{paragraphs} 个段落，{questions} 个问题"),
    "relevance_indexing": ("relevance: indexing through the indexer (with embeddings)…", "相关性：经索引器建立索引（生成向量）…"),
    "relevance_indexer": ("relevance: indexer {result}", "相关性：索引器 {result}"),
    "relevance_raw_lists": ("relevance: raw lists for tuning…", "相关性：获取调优用的原始结果列表…"),
    "relevance_no_data": ("no CMRC 2018 file at {path}: pass --data or set RSVC_EVAL_CMRC", "{path} 处没有 CMRC 2018 文件：请用 --data 指定，或设置 RSVC_EVAL_CMRC"),
    "relevance_needs_embedder": ("bench.relevance needs an embedder (RSVC_EMBEDDER local or openai)", "bench.relevance 需要向量模型（RSVC_EMBEDDER 设为 local 或 openai）"),
    # python -m bench.query (scripts/test's benchmark smoke)
    "bench_corpus": ("corpus {chunks} chunks", "语料 {chunks} 个分段"),
    "bench_indexing": ("  indexing {result}", "  建立索引 {result}"),
    "bench_embedded": ("  embedded {done}/{total} ({rate}/s)", "  已生成向量 {done}/{total}（{rate}/秒）"),
    "bench_peak_rss": ("indexer peak RSS on {mb} MB", "索引器在 {mb} MB 上的峰值 RSS"),
    "bench_three_nodes": ("three nodes: starting scripts/es-cluster.sh", "三节点：正在启动 scripts/es-cluster.sh"),
    "bench_separate_cores": ("  {name} c=16  separate cores {result}", "  {name} c=16  各占核心 {result}"),
    "bench_hop_floor": ("  {name} c=16  hop floor {result}", "  {name} c=16  转发下限 {result}"),
    "bench_two_cpus": ("--separate-cores needs at least 2 CPUs", "--separate-cores 至少需要 2 个 CPU"),
    "bench_one_local_node": ("--separate-cores needs one Elasticsearch node on this machine", "--separate-cores 需要本机上的一个 Elasticsearch 节点"),
    # python -m bench.hybrid (scripts/test's hybrid smoke)
    "bench_corpus_tagged": ("corpus {chunks} chunks ({tag})", "语料 {chunks} 个分段（{tag}）"),
    "bench_reusing": ("  reusing {index} ({count} chunks)", "  复用 {index}（{count} 个分段）"),
    "bench_indexed": ("  indexed {done}/{total} ({rate}/s)", "  已索引 {done}/{total}（{rate}/秒）"),
    "bench_selectivity": ("  selectivity {row}", "  选择性 {row}"),
    "bench_hybrid_missed": ("hybrid smoke: missed {missed}", "混合检索冒烟测试：未达标 {missed}"),
    # python -m bench.freshness, bench.freshness.hold
    "bench_fresh_writing": ("freshness: {source}: writing and indexing …", "时效：{source}：正在写入并建立索引 …"),
    "bench_fresh_scenario": ("freshness: {name} …", "时效：{name} …"),
    "bench_fresh_killed": ("freshness: {clock} the watcher killed", "时效：{clock} 已杀掉监视进程"),
    "bench_fresh_started": ("freshness: {clock} the watcher started again", "时效：{clock} 已重新启动监视进程"),
    "bench_hold_round": ("hold: round {round}, {name}: {seconds} s (refresh {refresh} s)", "扣住：第 {round} 轮，{name}：{seconds} 秒（刷新 {refresh} 秒）"),
    # python -m bench.features.*
    "bench_audit_cpu": ("audit: +{ms} ms CPU per search", "审计：每次检索多用 {ms} 毫秒 CPU"),
    "bench_mcp_cpu": ("mcp: +{ms} ms CPU per search", "MCP：每次检索多用 {ms} 毫秒 CPU"),
    "bench_tenants": ("tenants: {result}", "租户：{result}"),
    # python -m bench.formats.*
    "bench_unknown_formats": ("unknown formats {unknown}; of {known}", "未知的格式 {unknown}；可选 {known}"),
    "bench_engine_alone": ("engine alone: {result}", "引擎单独：{result}"),
    "bench_through_indexer": ("indexer: {result}", "经索引器：{result}"),
    # python -m bench.indexing.*
    "bench_first_load": ("first load: {result}", "首次加载：{result}"),
    "bench_unchanged": ("unchanged:  {result}", "未改动：{result}"),
    "bench_changed": ("changed:    {result}", "改动后：{result}"),
    "bench_shards_plain": ("no embedding, {count} shard(s): {result}", "不生成向量，{count} 个分片：{result}"),
    "bench_shards_embedded": ("embedding, {count} shard(s): {result}", "生成向量，{count} 个分片：{result}"),
    "bench_server_alone": ("server alone: {result}", "模型服务单独：{result}"),
    # python -m bench.permissions.*
    "bench_objects_written": ("{n} objects written in {seconds} s", "已写入 {n} 个对象，用时 {seconds} 秒"),
    "bench_without_rules": ("without rules: {result}", "不用规则：{result}"),
    "bench_with_rules": ("with rules:    {result}", "使用规则：{result}"),
    "bench_changed_rule": ("a changed rule: {result}", "改动一条规则：{result}"),
    "bench_small_directory": ("small directory: {result}", "小目录：{result}"),
    "bench_large_directory": ("large directory: {result}", "大目录：{result}"),
    "bench_served": ("/retrieval small: {small}\n/retrieval large: {large}", "/retrieval 小目录：{small}\n/retrieval 大目录：{large}"),
    "bench_in_force": ("in force: {result}", "生效：{result}"),
    "bench_small_domain": ("small domain: {result}", "小域：{result}"),
    "bench_large_domain": ("large domain: {result}", "大域：{result}"),
    "bench_policy_written": ("policy: {n} lines written in {seconds} s", "策略：已写入 {n} 行，用时 {seconds} 秒"),
    "bench_no_reload": ("no reload:     {result}", "不重新加载：{result}"),
    "bench_while_reloading": ("while reloading ({n} reloads): {result}", "重新加载期间（{n} 次）：{result}"),
    # python -m bench.smb.freshness
    "bench_samba_failed": ("scripts/samba-ad.sh start failed:\n{stderr}", "scripts/samba-ad.sh start 失败：\n{stderr}"),
    "bench_share_never_indexed": ("the watcher never indexed the share: {log}", "监视进程始终没有为该共享建立索引：{log}"),
    "bench_dacl": ("dacl {n}: {took}", "改 DACL {n}：{took}"),
    "bench_move": ("move {n}: {narrowed} / {whole}", "移动 {n}：{narrowed} / {whole}"),
}  # fmt: skip
