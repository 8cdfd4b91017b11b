# Shared by scripts/test and scripts/demo: a Python >= 3.11 virtualenv with the project installed.
# Sourced, not run. Re-installs only when pyproject.toml changed since the last install.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${RSVC_VENV:-$ROOT/.venv}

find_python() {
  local candidate
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  echo "error: Python >= 3.11 is required (looked for python3.13 … python3 on PATH)" >&2
  return 1
}

ensure_venv() {
  local stamp=$VENV/.installed-from hash
  hash=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating virtualenv in $VENV" >&2
    "$(find_python)" -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
    echo "setup: installing retrieval-svc and its dev tools (a minute or two the first time)" >&2
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
    command -v go >/dev/null || { echo "error: Go is needed to build $name" >&2; exit 1; }
    echo "setup: building $name $version with go install (once, a few minutes)" >&2
    mkdir -p "$GOBIN_DIR"
    GOBIN=$GOBIN_DIR GOFLAGS=-mod=mod go install "$module@$version"
    touch "$marker"
  fi
}
