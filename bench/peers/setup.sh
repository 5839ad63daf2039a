#!/usr/bin/env bash
# Installs the peer libraries at pinned versions: redis-py and pottery from
# PyPI into the venv `make python` built this repository's Python package in
# (target/python-venv, or the python given as $1), so one interpreter runs
# all Python rows; ioredis, redlock (5.0.0-beta.2 and 4.2.0) and
# redis-semaphore from npm into bench/peers/node_modules
# (git-ignored). Section 7's Redisson read-write lock row needs nothing here:
# its Lua is written in bench/src/redisson_rwlock.rs.
set -euo pipefail
cd "$(dirname "$0")"
py="${1:-../../target/python-venv/bin/python}"
if [ -x "$py" ]; then
  "$py" -m pip install -q "redis==5.2.1" "pottery==3.0.1"
  "$py" -c 'import redis_lock_client' 2>/dev/null ||
    echo "redis_lock_client not importable by $py (make python): the package's rows will be missing"
else
  echo "$py missing (make python): skipping the Python rows"
fi
if command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund
else
  echo "npm missing: skipping the Node peer"
fi
