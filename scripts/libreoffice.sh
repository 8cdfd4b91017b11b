#!/usr/bin/env bash
# LibreOffice, headless, for the indexer's old and Chinese office formats (.doc, .ppt, .rtf,
# OpenDocument, WPS Office's .wps/.et/.dps): Debian's libreoffice-core-nogui with the writer,
# calc and impress filters (no X11, about 100 MB), installed with apt-get when it is missing
# and we are root. Prints the path of soffice.
#
#   scripts/libreoffice.sh
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
PACKAGES="libreoffice-core-nogui libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui"
installed() {  # every package, not just soffice: without the writer filter a .doc cannot be read
  if command -v dpkg-query >/dev/null 2>&1; then
    for package in $PACKAGES; do
      [ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" = "install ok installed" ] || return 1
    done
  fi
  command -v soffice >/dev/null 2>&1
}
if ! installed && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say2 "libreoffice: installing Debian's $PACKAGES (once, about a minute)" "libreoffice：安装 Debian 的 $PACKAGES（只需一次，约一分钟）" >&2
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $PACKAGES >/dev/null 2>&1 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 && apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $PACKAGES >/dev/null; }
fi
installed ||
  { say2 "libreoffice: error: soffice or a filter is missing (install Debian's $PACKAGES)" "libreoffice：错误：缺少 soffice 或某个过滤器（请安装 Debian 的 $PACKAGES）" >&2; exit 1; }
command -v soffice
