# Shared by scripts/test and scripts/demo: a Python >= 3.11 virtualenv with the project installed.
# Sourced, not run. Re-installs only when pyproject.toml changed since the last install.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${RSVC_VENV:-$ROOT/.venv}
source "$ROOT/scripts/_say.sh"

find_python() {
  local candidate
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  say2 "error: Python >= 3.11 is required (looked for python3.13 … python3 on PATH)" "错误：需要 Python >= 3.11（在 PATH 上找过 python3.13 … python3）" >&2
  return 1
}

ensure_venv() {
  local stamp=$VENV/.installed-from hash
  hash=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  if [ ! -x "$VENV/bin/python" ]; then
    say2 "setup: creating virtualenv in $VENV" "setup：在 $VENV 创建虚拟环境" >&2
    "$(find_python)" -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
    say2 "setup: installing retrieval-svc and its dev tools (a minute or two the first time)" "setup：安装 retrieval-svc 及其开发工具（第一次需要一两分钟）" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e "$ROOT[dev]" >&2
    echo "$hash" >"$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}

# Go tools of the deployment checks (scripts/check-deploy, scripts/helm), built once with
# `go install` into .cache/go-bin.
HELM_VERSION=v3.22.0
GOBIN_DIR=$ROOT/.cache/go-bin

go_tool() {  # name module version
  local name=$1 module=$2 version=$3 marker=$GOBIN_DIR/.$1-$3
  if [ ! -x "$GOBIN_DIR/$name" ] || [ ! -f "$marker" ]; then
    command -v go >/dev/null || { say2 "error: Go is needed to build $name" "错误：构建 $name 需要 Go" >&2; exit 1; }
    say2 "setup: building $name $version with go install (once, a few minutes)" "setup：用 go install 构建 $name $version（只需一次，几分钟）" >&2
    mkdir -p "$GOBIN_DIR"
    GOBIN=$GOBIN_DIR GOFLAGS=-mod=mod go install "$module@$version"
    touch "$marker"
  fi
}
