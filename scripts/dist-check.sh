#!/usr/bin/env bash
# make dist-check: what `make dist` put in dist/, used the way a user who
# downloads it would, with no Rust toolchain and no compiler:
#   1. every artifact matches dist/SHA256SUMS;
#   2. the Debian package, unpacked (dpkg-deb -x, no root install), starts a
#      redis-server from its own paths: the installed config snippet loads the
#      installed module (its loadmodule line pointed into the unpacked tree),
#      MODULE LIST shows this version, LOCK.ACQUIRE grants;
#   3. the CLI binary from dist/ runs a command under a lock on that server;
#   4. the wheel installs into a fresh venv whose PATH has no cargo, rustc or
#      C compiler (pip may only take the binary wheel), and takes a lock.
# Builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["version"])')
server=${REDIS_SERVER:-redis-server}
cli=${REDIS_CLI:-redis-cli}

step() { echo "== dist-check: $*"; }
fail() { echo "dist-check FAILED: $*" >&2; exit 1; }

step "SHA256SUMS"
(cd dist && sha256sum --check --quiet SHA256SUMS) || fail "dist/SHA256SUMS does not match"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redis-lock-dist-check.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- 2. The Debian package ------------------------------------------------
debs=(dist/redis-lock_"$version"_*.deb)
[ -f "${debs[0]}" ] || fail "no dist/redis-lock_${version}_*.deb"
deb=${debs[0]}
step "$deb"
[ "$(dpkg-deb --field "$deb" Package)" = redis-lock ] || fail "Package field"
[ "$(dpkg-deb --field "$deb" Version)" = "$version" ] || fail "Version field"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/redis/redis-lock.conf \
  || fail "/etc/redis/redis-lock.conf is not a conffile"
unpacked=$tmp/root
dpkg-deb -x "$deb" "$unpacked"
modpath=/usr/lib/redis/modules/libredis_lock.so
[ -f "$unpacked$modpath" ] || fail "$modpath not in the package"
conf=$unpacked/etc/redis/redis-lock.conf
grep -qx "loadmodule $modpath" "$conf" || fail "the config snippet does not load $modpath"
# Where a root install would have put the tree, it is under $unpacked here.
sed -i "s|^loadmodule $modpath\$|loadmodule $unpacked$modpath|" "$conf"

port=$(python3 -c '
import random, socket
# Below the ephemeral range (clients get their local ports there); never 6379.
for _ in range(200):
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("no free port")')
mkdir "$tmp/data"
# The shipped settings as included; a first start is guarded for
# lock.max-ttl-ms (a new disk cannot be told from a wiped one), which a
# throwaway server turns off on its command line, as tests/production.rs
# shortens it.
"$server" --port "$port" --bind 127.0.0.1 --dir "$tmp/data" --include "$conf" \
  --lock.restart-delay-ms 0 >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  [ "$("$cli" -p "$port" PING 2>/dev/null)" = PONG ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; fail "the server did not start"; }
  sleep 0.1
done
[ "$("$cli" -p "$port" PING)" = PONG ] || { cat "$tmp/server.log" >&2; fail "the server does not answer"; }
rcli() { "$cli" -p "$port" "$@"; }
rcli MODULE LIST | tr '\n' ' ' | grep -q "name lock ver $(python3 -c "
m, n, p = map(int, '$version'.split('.')); print(m * 10000 + n * 100 + p)") path $unpacked$modpath" \
  || { rcli MODULE LIST >&2; fail "MODULE LIST does not show the unpacked module at version $version"; }
[ "$(rcli CONFIG GET appendfsync | tail -1)" = always ] || fail "the config snippet was not applied"
token=$(rcli LOCK.ACQUIRE dist-check:deb owner-deb 10000)
[[ "$token" =~ ^[0-9]+$ ]] && [ "$token" -gt 0 ] || fail "LOCK.ACQUIRE answered '$token'"
echo "module $version from the .deb: LOCK.ACQUIRE granted token $token"
url=redis://127.0.0.1:$port/

# A PATH with what the checks below need and no Rust toolchain or compiler:
# symlinks to sh and cat only (/usr/bin itself holds cc and often cargo).
bin=$tmp/bin
mkdir "$bin"
ln -s "$(command -v sh)" "$bin/sh"
ln -s "$(command -v cat)" "$bin/cat"

# ---- 3. The CLI binary ------------------------------------------------------
step "dist/redis-lock"
[ "$(env -i PATH="$bin" dist/redis-lock --version)" = "redis-lock $version" ] || fail "redis-lock --version"
out=$(env -i PATH="$bin" dist/redis-lock --servers "$url" run dist-check:cli -- sh -c 'echo "held $REDIS_LOCK_NAME token $REDIS_LOCK_TOKEN"')
[[ "$out" =~ ^held\ dist-check:cli\ token\ [0-9]+$ ]] || fail "redis-lock run printed '$out'"
echo "$out"
[ "$(rcli LOCK.STATUS dist-check:cli)" = "" ] || fail "the CLI left dist-check:cli held"

# ---- 4. The wheel, in a fresh venv without a toolchain ---------------------
wheels=(dist/redis_lock_client-"$version"-cp39-abi3-manylinux_*.whl)
[ -f "${wheels[0]}" ] || fail "no abi3 manylinux wheel of version $version in dist/"
wheel=$root/${wheels[0]}
step "$wheel"
python3 -m venv "$tmp/venv"
venv_env=(env -i "PATH=$tmp/venv/bin:$bin" "HOME=$tmp" PIP_NO_CACHE_DIR=1
  PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONNOUSERSITE=1)
for tool in cargo rustc rustup cc gcc c++ clang ld; do
  if "${venv_env[@]}" sh -c "command -v $tool" >/dev/null; then
    fail "$tool is on the venv's PATH"
  fi
done
# --only-binary/--no-index: pip may neither build nor download anything.
"${venv_env[@]}" python -m pip install --quiet --no-index --only-binary=:all: "$wheel" \
  || fail "pip refused the wheel"
"${venv_env[@]}" python - "$url" "$version" <<'EOF'
import importlib.metadata
import shutil
import sys

url, version = sys.argv[1], sys.argv[2]
for tool in ("cargo", "rustc", "cc", "gcc"):
    assert shutil.which(tool) is None, f"{tool} found at {shutil.which(tool)}"

import redis_lock_client
from redis_lock_client import Locker, Taken

assert importlib.metadata.version("redis-lock-client") == version, importlib.metadata.version("redis-lock-client")
assert redis_lock_client.__version__ == version, redis_lock_client.__version__
native = redis_lock_client._native.__file__
assert native.endswith(".abi3.so"), native

locker = Locker([url], ttl=10.0)
with locker.lock("dist-check:wheel") as lock:
    assert lock.token > 0
    try:
        with locker.lock("dist-check:wheel"):
            raise AssertionError("a second holder got the lock")
    except Taken:
        pass
    print(f"wheel {version} on CPython {sys.version.split()[0]}: lock token {lock.token}")
EOF
step "all artifacts work without a Rust toolchain"
