#!/usr/bin/env bash
# A Chinese TrueType font for the tests and benchmarks that draw pictures of Chinese text
# (scanned pages and images for OCR, bench/formats/render.py): Debian's `fonts-wqy-zenhei`,
# installed with apt-get when it is missing and we are root. Prints the font's path.
#
#   scripts/cjk-font.sh
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
FONT=/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc
if [ ! -f "$FONT" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say2 "cjk-font: installing Debian's fonts-wqy-zenhei (once)" "cjk-font：安装 Debian 的 fonts-wqy-zenhei（只需一次）" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q fonts-wqy-zenhei >/dev/null 2>&1 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q fonts-wqy-zenhei >/dev/null; }
fi
[ -f "$FONT" ] || { say2 "cjk-font: error: $FONT missing (install Debian's fonts-wqy-zenhei)" "cjk-font：错误：缺少 $FONT（请安装 Debian 的 fonts-wqy-zenhei）" >&2; exit 1; }
echo "$FONT"
