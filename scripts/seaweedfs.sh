#!/usr/bin/env bash
# SeaweedFS's `weed`, the S3-compatible server the freshness benchmark lists a 100,000-object
# bucket on (python -m bench.freshness --s3-server seaweedfs): moto, the suite's S3, lists in
# quadratic time. Apache-2.0. Built once from the Go module proxy into .cache/go-bin (about
# 8 minutes on 2 cores); `go install` refuses the module (its go.mod has replace directives),
# so it is built inside a copy of the module. The benchmark alone uses it, never the suite.
#
#   scripts/seaweedfs.sh path    build if needed, print the binary's path
set -euo pipefail
case "${1:-}" in -h|--help|"") sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
MODULE=github.com/seaweedfs/seaweedfs
VERSION=v0.0.0-20261109003541-7506e5f91cd6  # (4.x; the proxy has no tagged v4 release)
BIN=$GOBIN_DIR/weed
case "$1" in
  path)
    if [ ! -x "$BIN" ] || [ ! -f "$GOBIN_DIR/.weed-$VERSION" ]; then
      command -v go >/dev/null || { say2 "error: Go is needed to build SeaweedFS" "错误：构建 SeaweedFS 需要 Go" >&2; exit 1; }
      say2 "setup: building SeaweedFS $VERSION with go build (once, about 8 minutes)" "setup：用 go build 构建 SeaweedFS $VERSION（只需一次，约 8 分钟）" >&2
      dir=$(go mod download -json "$MODULE@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
      work=$(mktemp -d)
      trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
      cp -r "$dir/." "$work/src"
      chmod -R u+w "$work/src"
      mkdir -p "$GOBIN_DIR"
      (cd "$work/src" && GOFLAGS=-mod=mod go build -o "$BIN" ./weed)
      touch "$GOBIN_DIR/.weed-$VERSION"
    fi
    echo "$BIN"
    ;;
  *) echo "error: unknown command $1 (try --help)" >&2; exit 2 ;;
esac
