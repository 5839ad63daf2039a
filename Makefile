# redis-lock — `make run` and `make test` are the two commands a newcomer needs.
# Both install what is missing first (Debian/Ubuntu packages via apt-get).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_lock.so
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps build run test lint unit integration chaos bench clean

all: build

# Installs redis-server, redis-tools (redis-cli) and libclang-dev (needed by
# the redis-module crate's bindgen) when any of them is missing.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
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
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

unit: build
	$(CARGO) test --release --workspace --lib --bins

integration: build
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --workspace --tests -- --test-threads=2

test: build lint
	REDIS_LOCK_MODULE=$(MODULE) $(CARGO) test --release --workspace -- --test-threads=2

clean:
	$(CARGO) clean
