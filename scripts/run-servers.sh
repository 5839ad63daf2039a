#!/usr/bin/env bash
# `make run N=3`: N servers with the module (redis.conf.example) on ports
# 7001..700N, in the foreground, each with its data and log in
# target/run/<port>/. Ctrl-C (or a TERM) stops them all; if one of them
# exits, the others are stopped too, so none is ever left running.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-3}"
server="${REDIS_SERVER:-redis-server}"
module="$root/target/release/libredis_lock.so"
case "$n" in [1-9]) ;; *) echo "N must be 1 to 9 (ports 7001..7009), not '$n'"; exit 64 ;; esac
[ -f "$module" ] || { echo "no $module: run make build"; exit 1; }

pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped ${#pids[@]} server(s)"
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

urls=()
for i in $(seq 1 "$n"); do
  port=$((7000 + i))
  dir="$root/target/run/$port"
  # redis.conf.example loads ./target/release/libredis_lock.so relative to
  # its `dir`, which is moved here: link the module into place.
  mkdir -p "$dir/target/release"
  ln -sf "$module" "$dir/target/release/libredis_lock.so"
  if redis-cli -p "$port" PING >/dev/null 2>&1; then
    echo "port $port is already in use"; exit 1
  fi
  "$server" "$root/redis.conf.example" --port "$port" --dir "$dir" \
    --logfile "$dir/server.log" --daemonize no &
  pids+=($!)
  urls+=("redis://127.0.0.1:$port/")
done
for i in $(seq 1 "$n"); do
  port=$((7000 + i))
  for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" PING >/dev/null 2>&1 || {
    echo "server on port $port did not start:"; tail -5 "$root/target/run/$port/server.log"; exit 1; }
done
echo "$n server(s) with the module, logs in target/run/<port>/server.log; Ctrl-C stops them all."
(IFS=,; echo "${urls[*]}")
# Until Ctrl-C, or until any one server exits: the EXIT trap stops the rest.
wait -n "${pids[@]}" || true
