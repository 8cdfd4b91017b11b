# Sourced by scripts/pg.sh, scripts/ldap.sh and scripts/samba-ad.sh: what every throwaway server script answers
# before its own commands — `--help` (its header), and `stop-all`: every server under its
# BASE folder (scripts/test's RSVC_SERVERS_DIR), which scripts/test runs on any exit.

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
        if [[ "$p" =~ ^[0-9.]+$ ]]; then "$0" stop "$p"; fi  # a port, or an address
      done
      exit 0
      ;;
  esac
}
