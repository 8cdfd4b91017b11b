#!/usr/bin/env bash
# MinIO's `minio`, an S3 server that sends its own bucket notifications: the freshness
# benchmark's --s3-server minio measures a real server's delivery (its webhook target posting
# to `retrieval-indexer watch --listen`) end to end. AGPL-3.0, run as a separate program,
# never linked. Built once from the Go module proxy into .cache/go-bin with `go install`
# (its go.mod has no replace directives). The benchmark and the tests that need it use it.
#
#   scripts/minio.sh path    build if needed, print the binary's path
set -euo pipefail
case "${1:-}" in -h|--help|"") sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
MODULE=github.com/minio/minio
VERSION=v0.0.0-20260212201848-7aac2a2c5b7c  # (the proxy's latest; MinIO tags no semver)
BIN=$GOBIN_DIR/minio
case "$1" in
  path)
    if [ ! -x "$BIN" ] || [ ! -f "$GOBIN_DIR/.minio-$VERSION" ]; then
      command -v go >/dev/null || { say2 "error: Go is needed to build MinIO" "错误：构建 MinIO 需要 Go" >&2; exit 1; }
      say2 "setup: building MinIO $VERSION with go install (once, several minutes)" "setup：用 go install 构建 MinIO $VERSION（只需一次，几分钟）" >&2
      mkdir -p "$GOBIN_DIR"
      GOBIN=$GOBIN_DIR GOFLAGS=-mod=mod go install "$MODULE@$VERSION"
      touch "$GOBIN_DIR/.minio-$VERSION"
    fi
    echo "$BIN"
    ;;
  *) echo "error: unknown command $1 (try --help)" >&2; exit 2 ;;
esac
