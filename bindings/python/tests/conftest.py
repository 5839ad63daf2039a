"""Real redis-server processes with the lock module, killed on teardown.

REDIS_LOCK_MODULE: the built module (default: target/release/ of the repo).
REDIS_SERVER: the server binary (default: redis-server on PATH).
"""

import os
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("REDIS_LOCK_MODULE", str(REPO / "target/release/libredis_lock.so"))
SERVER = os.environ.get("REDIS_SERVER", "redis-server")


def _free_port() -> int:
    """A free port below Linux's ephemeral range (32768 up), where the kernel
    picks outgoing connections' local ports: one from there could be taken
    by a client before the server binds it."""
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def inline(port: int, command: str) -> bytes:
    """One inline command (no spaces inside arguments); the raw first reply line."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(command.encode() + b"\r\n")
        return s.recv(4096).split(b"\r\n", 1)[0]


class Server:
    def __init__(self, extra_args=()):
        if not os.path.exists(MODULE):
            pytest.fail(f"module not built: {MODULE} (cargo build --release)")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--loadmodule", MODULE, "restart-delay-ms", "0",
             *extra_args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not _pings(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"{SERVER} with {MODULE} did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def servers():
    """servers(n) starts n servers and returns their URLs; all are killed
    at teardown. `servers.started` lists the Server objects."""
    started = []

    def start(n: int, extra_args=()):
        new = [Server(extra_args) for _ in range(n)]
        started.extend(new)
        return [s.url for s in new]

    start.started = started
    try:
        yield start
    finally:
        for s in started:
            s.stop()


@pytest.fixture
def counter_file(tmp_path):
    path = tmp_path / "counter"
    path.write_text("0")
    return path
