#!/usr/bin/env bash
# Installs the peer libraries at pinned versions: redis-py and pottery from
# PyPI into the venv `make python` built this repository's Python package in
# (target/python-venv, or the python given as $1), so one interpreter runs
# all Python rows; ioredis, redlock (5.0.0-beta.2 and 4.2.0) and
# redis-semaphore from npm into bench/peers/node_modules
# (git-ignored); and Redisson's two read-write lock sources at the tag
# redisson-4.7.0, hash-checked, into bench/peers/redisson (git-ignored),
# whose Lua section 7 runs.
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

# Redisson's RedissonReadLock.java / RedissonWriteLock.java at the tag
# redisson-4.7.0 (commit 0c286e86eb813a26222b3dc281f0ca368dd46561).
redisson_base=https://raw.githubusercontent.com/redisson/redisson/0c286e86eb813a26222b3dc281f0ca368dd46561/redisson/src/main/java/org/redisson
mkdir -p redisson
for pair in RedissonReadLock:0ec298db59ee2c86eac40b775d74a02944e6c27208c3e107cd6aaa88fd20df0f \
            RedissonWriteLock:6b9c175a920546532aaa3f40e2621f256cf1401250d61414fd5a05ea896e0768; do
  name="${pair%%:*}" sum="${pair##*:}" file="redisson/${pair%%:*}.java"
  echo "$sum  $file" | sha256sum --check --quiet 2>/dev/null && continue
  if curl -fsSL "$redisson_base/$name.java" -o "$file.tmp" &&
     echo "$sum  $file.tmp" | sha256sum --check --quiet; then
    mv "$file.tmp" "$file"
  else
    rm -f "$file.tmp"
    echo "$name.java not fetched: the Redisson read-write row will be missing"
  fi
done
