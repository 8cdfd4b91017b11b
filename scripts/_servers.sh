# Sourced by scripts/pg.sh, scripts/ldap.sh and scripts/samba-ad.sh: what every throwaway
# server script answers before its own commands — `--help` (its header), and `stop-all`:
# every server under its BASE folder (scripts/test's RSVC_SERVERS_DIR), which scripts/test
# runs on any exit. The servers leave the script's process group (pg_ctl's postmaster calls
# setsid, slapd and samba daemonize), so a run interrupted while one starts may stop before
# its pid file is read: `stop-all` then ends every process still naming a folder under BASE
# (its data directory or its configuration file) — the folder is this run's own, so no other
# run's server is touched.

# Every process whose command line names a path under $1 (its pid).
processes_under() {
  local cmdline pid
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}; pid=${pid%/cmdline}
    [ "$pid" != $$ ] || continue
    if { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -qF -- "$1/"; then echo "$pid"; fi
  done
}

# TERM to every process naming a path under $1; KILL to what remains after a grace time.
end_processes_under() {
  local pids alive
  pids=$(processes_under "$1")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 1 100); do
    alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

server_commands() {
  case "${1:-}" in
    -h|--help|help)
      sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
      exit 0
      ;;
    stop-all)
      local d p
      for d in "$BASE"/*/; do
        [ -d "$d" ] || continue
        p=$(basename "$d")
        if [[ "$p" =~ ^[0-9.]+$ ]]; then "$0" stop "$p" || true; fi  # a port, or an address
      done
      [ -d "$BASE" ] && end_processes_under "$BASE"
      exit 0
      ;;
  esac
}
