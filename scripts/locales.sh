#!/usr/bin/env bash
# The locales the suite runs in besides C.UTF-8 — zh_CN.UTF-8 (a Chinese administrator's
# terminal) and en_US.UTF-8 — generated with Debian's `locales` package (installed with
# apt-get when it is missing and we are root). Without them a program asked for zh_CN.UTF-8
# falls back to C and bash, Perl and PostgreSQL warn on every start.
#
#   scripts/locales.sh
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
WANTED=(zh_CN.UTF-8 en_US.UTF-8)
have() { locale -a 2>/dev/null | grep -qix "$(echo "$1" | sed 's/UTF-8/utf8/')"; }
missing=()
for name in "${WANTED[@]}"; do have "$name" || missing+=("$name"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  say2 "locales: ${missing[*]} missing (as root: scripts/locales.sh; or sudo locale-gen ${missing[*]})" "locales：缺少 ${missing[*]}（以 root 运行 scripts/locales.sh；或 sudo locale-gen ${missing[*]}）" >&2
  exit 0  # (the suite still runs: what it needs of them it sets itself)
fi
if ! command -v locale-gen >/dev/null; then
  say2 "locales: installing Debian's locales package (once)" "locales：安装 Debian 的 locales 软件包（只需一次）" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q locales >/dev/null 2>&1 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q locales >/dev/null; }
fi
say2 "locales: generating ${missing[*]} (once)" "locales：生成 ${missing[*]}（只需一次）" >&2
for name in "${missing[@]}"; do
  # (uncommented in /etc/locale.gen, so a later locale-gen keeps it)
  sed -i "s/^# *\(${name} UTF-8\)$/\1/" /etc/locale.gen
  grep -qx "$name UTF-8" /etc/locale.gen || echo "$name UTF-8" >>/etc/locale.gen
done
locale-gen --keep-existing >/dev/null
for name in "${missing[@]}"; do
  have "$name" || { say2 "locales: error: $name still missing after locale-gen" "locales：错误：locale-gen 之后仍缺少 $name" >&2; exit 1; }
done
