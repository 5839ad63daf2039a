# redis-lock — `make run` and `make test` are the two commands a newcomer needs.
# Both install what is missing first (Debian/Ubuntu packages via apt-get).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_lock.so
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps build run test lint unit integration chaos bench clean memcheck

all: build

# Installs redis-server, redis-tools (redis-cli), libclang-dev (bindgen of
# the redis-module crate), gcc (the test clock shim), pkg-config and
# libssl-dev (TLS in the client) when any of them is missing.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	dpkg -s libssl-dev >/dev/null 2>&1 || missing="$$missing libssl-dev"; \
	dpkg -s libclang-dev >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	  if [ -x /etc/init.d/redis-server ] && pgrep -x redis-server >/dev/null; then \
	    $(SUDO) /etc/init.d/redis-server stop >/dev/null 2>&1 || true; \
	  fi; \
	fi

build: deps
	$(CARGO) build --release --workspace

# Foreground redis-server on port $(PORT) with the module loaded.
run: build
	redis-server redis.conf.example --port $(PORT)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path bench/Cargo.toml -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

unit: build
	$(CARGO) test --release --workspace --lib --bins

integration: build
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --workspace --tests -- --test-threads=2

test: build lint
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --workspace -- --test-threads=2

# Benchmarks: installs the pinned peer libraries (PyPI, npm), then measures.
# BENCH_QUICK=1 for a smoke run of under a minute.
bench: build
	bench/peers/setup.sh
	$(CARGO) build --release --manifest-path bench/Cargo.toml
	REDIS_LOCK_MODULE=$(MODULE) bench/target/release/redis-lock-bench

# Long chaos run (default 5 minutes): 5 servers, nemeses, the checker's table.
CHAOS_SECONDS ?= 300
CHAOS_WORKERS ?= 6
chaos: build
	REDIS_LOCK_MODULE=$(MODULE) ./target/release/redis-lock-chaos --seconds $(CHAOS_SECONDS) --workers $(CHAOS_WORKERS)

# Blocked-client leaks: every way a WAIT client leaves, against a
# redis-server under valgrind (needs valgrind; not part of `make test`).
memcheck: build
	MODULE=$(MODULE) scripts/memcheck.sh

clean:
	$(CARGO) clean
