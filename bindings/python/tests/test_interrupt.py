"""Ctrl-C while blocked in a lock wait raises KeyboardInterrupt; the
interpreter does not crash."""

import signal
import socket
import subprocess
import sys
import textwrap
import time

from redis_lock_client import Locker

WAITER = textwrap.dedent(
    """
    import sys
    from redis_lock_client import Locker
    locker = Locker([sys.argv[1]])
    try:
        print("waiting", flush=True)
        locker.lock("held", wait=600.0)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(0)
    sys.exit(3)
    """
)


def test_sigint_interrupts_a_wait(servers):
    (url,) = servers(1)
    holder = Locker([url]).lock("held")
    child = subprocess.Popen(
        [sys.executable, "-c", WAITER, url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "waiting"
        # One server: the child waits inside the server (LOCK.ACQUIRE WAIT),
        # so a blocked client there means it is blocked inside lock().
        port = int(url.rsplit(":", 1)[1])
        for _ in range(600):
            if _blocked_clients(port) > 0:
                break
            time.sleep(0.05)
        assert _blocked_clients(port) > 0
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 0
        assert child.stdout.read().strip() == "interrupted"
        assert not holder.lost
    finally:
        child.kill()
        child.wait()
        holder.release()


def _blocked_clients(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"INFO clients\r\n")
        data = b""
        while b"blocked_clients:" not in data or not data.endswith(b"\r\n"):
            data += s.recv(4096)
    line = next(l for l in data.split(b"\r\n") if l.startswith(b"blocked_clients:"))
    return int(line.split(b":")[1])
