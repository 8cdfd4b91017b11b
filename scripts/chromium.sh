#!/usr/bin/env bash
# Headless Chromium and its driver for the console's browser tests, from Debian's
# `chromium` and `chromium-driver` packages, and a CJK font (`fonts-wqy-zenhei`) so the
# Chinese pages' screenshots show characters — installed with apt-get when missing and we
# are root. Prints the two paths: the browser, then the driver.
#
#   scripts/chromium.sh
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/_say.sh"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
log() { echo "chromium: $*" >&2; }

find_both() {
  browser=$(command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true)
  driver=$(command -v chromedriver 2>/dev/null || true)
}

PACKAGES="chromium chromium-driver fonts-wqy-zenhei"
find_both
font=$(ls /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc 2>/dev/null || true)
if { [ -z "$browser" ] || [ -z "$driver" ] || [ -z "$font" ]; } && [ "$(id -u)" = 0 ] &&
  command -v apt-get >/dev/null; then
  log "$(say2 "installing Debian's $PACKAGES packages (once, a few minutes)" "安装 Debian 的 $PACKAGES 软件包（只需一次，几分钟）")"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q $PACKAGES >/dev/null 2>&1 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q $PACKAGES >/dev/null; }
  find_both
fi
[ -n "$browser" ] && [ -n "$driver" ] ||
  { log "$(say2 "error: chromium and chromedriver not found (install Debian's chromium chromium-driver)" "错误：找不到 chromium 和 chromedriver（请安装 Debian 的 chromium chromium-driver）")"; exit 1; }
printf '%s\n%s\n' "$browser" "$driver"
