#!/usr/bin/env bash
# `make examples`: start a server with the module (redis.conf.example on a
# free port, in a scratch directory), install each example's pinned
# dependencies into target/examples/, run every example as shipped and check
# what it prints. The server is shut down on exit, whatever happens.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/target/examples"
mkdir -p "$work"
server="${REDIS_SERVER:-redis-server}"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
data="$(mktemp -d)"
# redis.conf.example loads ./target/release/libredis_lock.so relative to its
# `dir`, which is moved to the scratch directory: link the module there.
mkdir -p "$data/target/release"
ln -s "$root/target/release/libredis_lock.so" "$data/target/release/"
"$server" "$root/redis.conf.example" --port "$port" --dir "$data" \
  --logfile "$data/server.log" --daemonize no &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" PING >/dev/null || { echo "server did not start:"; cat "$data/server.log"; exit 1; }
export PORT="$port"

expect() { # expect NAME PATTERN OUTPUT
  if ! grep -Eq "$2" <<<"$3"; then
    echo "example $1: expected /$2/ in its output:"; echo "$3"; exit 1
  fi
}

# Python (redis-py)
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/examples/requirements.txt"
out=$("$work/venv/bin/python" "$root/examples/python_raw.py")
expect python_raw "acquired, fencing token [0-9]+" "$out"
expect python_raw "released: 1" "$out"
expect python_raw "waited, token [0-9]+" "$out"
echo "ok examples/python_raw.py"

# Node (ioredis)
mkdir -p "$work/node"
cp "$root/examples/package.json" "$work/node/"
(cd "$work/node" && npm install --silent --no-audit --no-fund >/dev/null)
cp "$root/examples/node_raw.mjs" "$work/node/"
out=$(node "$work/node/node_raw.mjs")
expect node_raw "acquired, fencing token [0-9]+" "$out"
expect node_raw "released: 1" "$out"
expect node_raw "waited, token [0-9]+" "$out"
echo "ok examples/node_raw.mjs"

# Rust (the quorum client), against the same server
out=$(cd "$root" && cargo run --quiet --release -p redis-lock-client --example quorum -- "redis://127.0.0.1:$port/")
expect quorum "token [0-9]+ valid for" "$out"
expect quorum "work done, still held: true" "$out"
echo "ok client/examples/quorum.rs"
echo "3 passed, 0 failed"
