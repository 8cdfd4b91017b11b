#!/usr/bin/env bash
# A throwaway local PostgreSQL for the test suite (the Casbin policy store), from Debian's
# `postgresql` package — installed with apt-get when it is missing and we are root.
#
#   scripts/pg.sh start PORT   initdb into a fresh folder, start on 127.0.0.1:PORT, print the
#                              SQLAlchemy URL (postgresql+psycopg://postgres@127.0.0.1:PORT/postgres)
#   scripts/pg.sh stop-all     stop every server under RSVC_SERVERS_DIR (scripts/test's)
#   scripts/pg.sh stop PORT    stop it and delete its folder
#
# PostgreSQL refuses to run as root: as root, the server runs as the system user rsvc-pg.
# Its folder is under /var/tmp (a checkout in a private folder is not reachable by that user).
# Trust authentication on loopback only: a test database, never a deployment.
set -euo pipefail

PG_USER=rsvc-pg
# Under RSVC_SERVERS_DIR when scripts/test set it (its servers, stopped together on any exit).
BASE=${RSVC_SERVERS_DIR:+$RSVC_SERVERS_DIR/pg}
BASE=${BASE:-/var/tmp/retrieval-svc-pg}
log() { echo "pg: $*" >&2; }
source "$(dirname "${BASH_SOURCE[0]}")/_say.sh"

find_bin() {
  local found
  found=$(command -v initdb 2>/dev/null || true)
  if [ -z "$found" ]; then
    found=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n1 || true)
  fi
  if [ -z "$found" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "$(say2 "installing Debian's postgresql package (once)" "安装 Debian 的 postgresql 软件包（只需一次）")"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql >/dev/null 2>&1 ||
      { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql >/dev/null; }
    found=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n1 || true)
  fi
  [ -n "$found" ] || { log "$(say2 "error: PostgreSQL's initdb not found (install Debian's postgresql)" "错误：找不到 PostgreSQL 的 initdb（请安装 Debian 的 postgresql）")"; exit 1; }
  dirname "$(readlink -f "$found")"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi
}

cmd=${1:-}
port=${2:-}
source "$(dirname "${BASH_SOURCE[0]}")/_servers.sh"
server_commands "$cmd"
[[ "$port" =~ ^[0-9]+$ ]] || { say2 "usage: scripts/pg.sh start|stop PORT | stop-all | --help" "用法：scripts/pg.sh start|stop PORT | stop-all | --help" >&2; exit 2; }
dir=$BASE/$port

case "$cmd" in
  start)
    bin=$(find_bin)
    if [ "$(id -u)" = 0 ]; then
      id "$PG_USER" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    fi
    mkdir -p "$BASE"
    chmod 755 "$BASE"
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown "$PG_USER" "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 start \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off" \
      >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      bin=$(find_bin)
      as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    say2 "usage: scripts/pg.sh start|stop PORT" "用法：scripts/pg.sh start|stop PORT" >&2
    exit 2
    ;;
esac
