#!/bin/bash
# Where one command's server time goes (bench/where-time-goes.md, "Server
# time per command"): a server with the module on a free port, 1M keys held
# as strings (fill=str) or locks (fill=lock) or none, then redis-benchmark
# -P 32 -c 20 over 1M random keys while perf records the server with dwarf
# call graphs; prints the command's usec/call and its time by kind.
#   bench/server-profile.sh <out-name> <none|str|lock> <command and args...>
#   e.g. bench/server-profile.sh release lock LOCK.RELEASE lk:__rand_int__ 0123456789abcdef0123456789abcdef
set -euo pipefail
name=$1; fill=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
module=${REDIS_LOCK_MODULE:-$here/../target/release/libredis_lock.so}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
owner=0123456789abcdef0123456789abcdef
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$module" restart-delay-ms 0 --logfile "$dir/redis.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
case $fill in
  str) python3 -c "
for i in range(1000000): print('SET lk:%012d $owner PX 600000' % i)" | redis-cli -p "$port" --pipe >/dev/null ;;
  lock) python3 -c "
for i in range(1000000): print('LOCK.ACQUIRE lk:%012d $owner 600000' % i)" | redis-cli -p "$port" --pipe >/dev/null ;;
esac
redis-cli -p "$port" config resetstat >/dev/null
perf record -F 999 --call-graph dwarf,8192 -p "$server" -o "$name.perf.data" 2>/dev/null &
recorder=$!
sleep 0.3
redis-benchmark -p "$port" -c 20 -P 32 -n 400000 -r 1000000 --csv "$@" | tail -1
kill -INT "$recorder"; wait "$recorder" || true
redis-cli -p "$port" info commandstats | grep -o "cmdstat_${1,,}:.*"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
perf script -i "$name.perf.data" 2>/dev/null | python3 "$here/server_profile_shares.py"
