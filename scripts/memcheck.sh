#!/usr/bin/env bash
# `make memcheck`: the ways a LOCK.ACQUIRE ... WAIT client can leave (timeout,
# disconnect, CLIENT KILL, CLIENT UNBLOCK, hand-off, take-back of a grant
# nobody received, SWAPDB, FLUSHALL, a hand-off deferred by CLIENT PAUSE)
# against one redis-server running under valgrind, then a clean SHUTDOWN and
# a check of valgrind's leak report.
# Fails on any "definitely lost" block except one-off allocations made while
# the module loads (RedisModule_OnLoad, e.g. the command-info version struct).
# The integration tests are not used here: they kill servers with SIGKILL
# (no leak report) and their timing bounds do not hold under valgrind.
set -euo pipefail
MODULE=${MODULE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/libredis_lock.so}
DIR=$(mktemp -d /tmp/redis-lock-memcheck.XXXXXX)
cli() { redis-cli -p "$PORT" "$@"; }
# VALGRIND= (empty) runs the scenario alone, e.g. to debug the script.
VALGRIND=${VALGRIND-valgrind --leak-check=full --log-file=$DIR/valgrind.log}
SERVER=""
for p in $(shuf -i 20000-45000 -n 5); do # a port taken meanwhile: try another
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue # someone listens
  PORT=$p
  $VALGRIND redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --save "" \
    --appendonly no --loadmodule "$MODULE" restart-delay-ms 0 >"$DIR/server.out" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do
    cli PING >/dev/null 2>&1 && break 2
    kill -0 $SERVER 2>/dev/null || break
    sleep 0.1
  done
  kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; SERVER=""
done
[ -n "$SERVER" ] || { echo "redis-server did not start:"; cat "$DIR/server.out"; exit 1; }
PIDS=(); ROUND=0
# On failure, never leave the server behind: TERM, then KILL if it lingers
# (one survived a failed run under valgrind).
trap 'kill "${PIDS[@]}" 2>/dev/null; kill -CONT $SERVER 2>/dev/null; kill -TERM $SERVER 2>/dev/null; sleep 2; kill -KILL $SERVER 2>/dev/null || true' EXIT
until_true() { # until_true <tries of 0.1 s> <command...>
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  echo "timed out waiting for: $* ($(cli LOCK.STATUS k | tr '\n' ' '))"; return 1
}
waiters_are() { [ "$(cli LOCK.STATUS k | sed -n 10p)" = "$1" ]; }
park() { # park <n>: n background clients waiting on k without limit
  PIDS=(); ROUND=$((ROUND + 1)) # fresh owners: an owner that holds k renews
  for i in $(seq "$1"); do
    # redis-cli itself, not the cli function: $! must be the client's pid.
    redis-cli -p "$PORT" LOCK.ACQUIRE k "p$ROUND-$i" 60000 WAIT 0 >/dev/null 2>&1 &
    PIDS+=($!)
  done
  until_true 600 waiters_are "$1"
}
unpark() { kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; }
cli LOCK.ACQUIRE k holder 600000 >/dev/null
echo "timeouts";    for _ in $(seq 300); do echo 'LOCK.ACQUIRE k w 1000 WAIT 1'; done | cli >/dev/null
echo "disconnects"; park 50; unpark
echo "client kill"; park 20; cli CLIENT KILL TYPE normal SKIPME yes >/dev/null; unpark
echo "unblock";     park 20
for id in $(cli CLIENT LIST | grep 'cmd=lock.acquire' | sed 's/^id=\([0-9]*\).*/\1/'); do
  cli CLIENT UNBLOCK "$id" "$( ((id % 2)) && echo TIMEOUT || echo ERROR)" >/dev/null
done; unpark
echo "hand-offs";   park 20
for _ in $(seq 21); do cli LOCK.RELEASE k "$(cli LOCK.STATUS k | sed -n 2p)" >/dev/null; done
unpark
echo "take-back";   cli LOCK.ACQUIRE k holder 600000 >/dev/null; park 2
kill -STOP $SERVER; redis-cli -p "$PORT" LOCK.RELEASE k holder >/dev/null & REL=$!
sleep 0.3; unpark; kill -CONT $SERVER; wait $REL || true
echo "swapdb, flushall"; cli DEL k >/dev/null; cli LOCK.ACQUIRE k holder 600000 >/dev/null; park 5
cli SWAPDB 0 1 >/dev/null; sleep 0.5; unpark
cli LOCK.ACQUIRE k holder 600000 >/dev/null; park 5; cli FLUSHALL >/dev/null; sleep 0.5; unpark
echo "write pause"; cli DEL k >/dev/null; cli LOCK.ACQUIRE k holder 200 >/dev/null; park 2
cli CLIENT PAUSE 1000 WRITE >/dev/null; sleep 1.5; unpark
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
for _ in $(seq 600); do kill -0 $SERVER 2>/dev/null || break; sleep 0.1; done
trap - EXIT
[ -n "$VALGRIND" ] || { echo "scenario done (no valgrind)"; rm -rf "$DIR"; exit 0; }
grep -A4 'LEAK SUMMARY' "$DIR/valgrind.log" || { echo "no leak report in $DIR"; exit 1; }
# Records are separated by "==pid== " lines; keep definite leaks outside OnLoad.
bad=$(awk '/definitely lost in loss record/ {rec=$0; on=1; next}
           on && /^==[0-9]+== $/ {if (rec !~ /RedisModule_OnLoad/) print rec "\n"; on=0; next}
           on {rec = rec "\n" $0}' "$DIR/valgrind.log")
if [ -n "$bad" ]; then echo "$bad"; echo "memcheck: leaks (log: $DIR/valgrind.log)"; exit 1; fi
echo "memcheck: no definite leaks outside module load"; rm -rf "$DIR"
