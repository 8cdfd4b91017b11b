#!/usr/bin/env bash
# A local three-node Elasticsearch cluster on loopback (same artifact and set-up as es.sh),
# for the node-loss tests and the three-node benchmark.
#
#   scripts/es-cluster.sh start          start n0, n1, n2; wait for all three; print their URLs
#                                        (comma-separated: RSVC_ES_URL takes that list)
#   scripts/es-cluster.sh stop           stop all three and delete their data
#   scripts/es-cluster.sh kill N         kill -9 node N (0, 1 or 2): a crash, not a shutdown
#   scripts/es-cluster.sh restart N      start node N again on its data; wait until it joined
#   scripts/es-cluster.sh pid N          print node N's pid
#
# Settings (environment):
#   RSVC_ES_CLUSTER_PORT  HTTP port of n0; n1 and n2 use the next two   (default 9250)
#                         (transport ports: HTTP port + 100)
#   RSVC_ES_CLUSTER_HEAP  heap of each node                             (default 384m)
#   RSVC_ES_VERSION, RSVC_ES_CACHE, ES_JAVA_HOME as for es.sh
# Every node is master-eligible and holds data. Three nodes on a 2-core machine share the same
# CPUs: this tests behaviour (a node lost and back), not capacity.
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/es.sh"

FIRST=${RSVC_ES_CLUSTER_PORT:-9250}
NODE_HEAP=${RSVC_ES_CLUSTER_HEAP:-384m}
NODES=(0 1 2)

cluster_init() {
  BASE=$(es_base)
  CLUSTER=$BASE/cluster-$FIRST
}
node_port() { printf '%s\n' $((FIRST + $1)); }
node_dir() { printf '%s/n%s\n' "$CLUSTER" "$1"; }
node_pid() { cat "$(node_dir "$1")/es.pid" 2>/dev/null; }
urls() {
  local out=() i
  for i in "${NODES[@]}"; do out+=("http://127.0.0.1:$(node_port "$i")"); done
  (IFS=,; printf '%s\n' "${out[*]}")
}

wait_nodes() {  # URL COUNT SECONDS
  local deadline=$((SECONDS + $3)) got
  while [ $SECONDS -lt "$deadline" ]; do
    got=$(curl -fsS -m 3 "$1/_cluster/health?wait_for_nodes=$2&timeout=2s" 2>/dev/null |
      sed -n 's/.*"number_of_nodes":\([0-9]*\).*/\1/p') || true
    [ "${got:-0}" -ge "$2" ] && return 0
    sleep 1
  done
  return 1
}

start_node() {  # N
  local i=$1 port dir java home seeds=() j
  port=$(node_port "$i")
  dir=$(node_dir "$i")
  home=$(install_home)
  java=$(find_java)
  for j in "${NODES[@]}"; do seeds+=("127.0.0.1:$(( $(node_port "$j") + 100 ))"); done
  mkdir -p "$dir/data" "$dir/logs" "$dir/tmp"
  rm -f "$dir/es.pid"
  local as_user=()
  if [ "$(id -u)" = 0 ]; then
    chown -R "$ES_USER" "$dir" "$home"
    as_user=("$(command -v runuser)" -u "$ES_USER" --)
  fi
  env -i PATH=/usr/bin:/bin HOME="$dir" ES_JAVA_HOME="$java" ES_TMPDIR="$dir/tmp" \
    ES_JAVA_OPTS="-Xms$NODE_HEAP -Xmx$NODE_HEAP" \
    "${as_user[@]}" "$home/bin/elasticsearch" -d -p "$dir/es.pid" \
      -E cluster.name="retrieval-svc-3n-$FIRST" -E node.name="n$i" \
      -E path.data="$dir/data" -E path.logs="$dir/logs" \
      -E network.host=127.0.0.1 -E http.port="$port" -E transport.port=$((port + 100)) \
      -E discovery.seed_hosts="$(IFS=,; echo "${seeds[*]}")" \
      -E cluster.initial_master_nodes=n0,n1,n2 \
      -E xpack.security.enabled=false \
      -E cluster.routing.allocation.disk.threshold_enabled=false \
      -E action.destructive_requires_name=false \
      >"$dir/logs/startup.out" 2>&1 \
    || { tail -n 30 "$dir/logs/startup.out" >&2; die "node n$i failed to start (logs in $dir/logs)"; }
}

cmd_cluster_start() {
  cluster_init
  local i
  if [ -n "$(node_pid 0)" ] && kill -0 "$(node_pid 0)" 2>/dev/null; then
    wait_nodes "http://127.0.0.1:$FIRST" 3 180 || die "the running cluster does not have 3 nodes"
    urls; return
  fi
  for i in "${NODES[@]}"; do
    answers "http://127.0.0.1:$(node_port "$i")" &&
      die "port $(node_port "$i") already answers; set RSVC_ES_CLUSTER_PORT to another first port"
  done
  [ "$BASE" = "$CACHE" ] || chmod 755 "$(dirname "$BASE")" "$BASE"
  mkdir -p "$CLUSTER"
  log "$(say2 "starting a 3-node cluster on 127.0.0.1:$FIRST-$((FIRST + 2)) (heap $NODE_HEAP each, data: $CLUSTER)" "在 127.0.0.1:$FIRST-$((FIRST + 2)) 上启动 3 节点集群（每个堆 $NODE_HEAP，数据：$CLUSTER）")"
  for i in "${NODES[@]}"; do start_node "$i"; done
  if ! wait_nodes "http://127.0.0.1:$FIRST" 3 300; then
    tail -n 30 "$(node_dir 0)/logs/retrieval-svc-3n-$FIRST.log" >&2 2>/dev/null || true
    die "the three nodes did not form a cluster (logs in $CLUSTER/n*/logs)"
  fi
  urls
}

cmd_cluster_stop() {
  cluster_init
  local i pid
  for i in "${NODES[@]}"; do
    pid=$(node_pid "$i") || continue
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for i in "${NODES[@]}"; do
    pid=$(node_pid "$i") || continue
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$CLUSTER"
  log "$(say2 "stopped the 3-node cluster" "已停止 3 节点集群")"
}

cmd_kill() {
  cluster_init
  local pid
  pid=$(node_pid "$1") || die "node n$1 is not running"
  kill -9 "$pid"
  log "$(say2 "killed n$1 (pid $pid) with SIGKILL" "已用 SIGKILL 终止 n$1（pid $pid）")"
}

cmd_restart() {
  cluster_init
  local pid
  pid=$(node_pid "$1" || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then die "node n$1 is still running"; fi
  start_node "$1"
  wait_nodes "http://127.0.0.1:$FIRST" 3 300 || die "n$1 did not rejoin the cluster"
  log "$(say2 "n$1 is back" "n$1 已恢复")"
}

case "${1:-}" in
  start)
    # (scripts/test stops a cluster its run started, whatever ends the run)
    if [ -n "${RSVC_SERVERS_DIR:-}" ]; then
      mkdir -p "$RSVC_SERVERS_DIR/es-cluster" && touch "$RSVC_SERVERS_DIR/es-cluster/$FIRST"
    fi
    cmd_cluster_start
    ;;
  stop) cmd_cluster_stop ;;
  kill) cmd_kill "${2:?node number 0, 1 or 2}" ;;
  restart) cmd_restart "${2:?node number 0, 1 or 2}" ;;
  pid) cluster_init; node_pid "${2:?node number}" ;;
  urls) cluster_init; urls ;;
  *) echo "usage: $0 start|stop|kill N|restart N|pid N|urls" >&2; exit 2 ;;
esac
