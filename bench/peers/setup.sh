#!/usr/bin/env bash
# Installs the peer libraries at pinned versions from PyPI and npm, into
# bench/peers/.venv and bench/peers/node_modules (both git-ignored).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || { echo "python3-venv missing: skipping Python peers"; }
fi
if [ -x .venv/bin/python ]; then
  .venv/bin/pip install -q "redis==5.2.1" "pottery==3.0.1"
  # This repository's Python package (bindings/python), built by pinned maturin.
  if command -v cargo >/dev/null 2>&1; then
    CARGO_TARGET_DIR="$PWD/../../target/python" .venv/bin/pip install -q ../../bindings/python
  fi
fi
if command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund
else
  echo "npm missing: skipping the Node peer"
fi
