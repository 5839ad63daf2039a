"""A Sentinel group as one node: redis+sentinel://host:port/service-name."""

import os
import subprocess
import tempfile
import time

import pytest

from conftest import SERVER, Server, _free_port, _pings, inline
from redis_lock_client import Locker


def _sentinel(primary_port: int, conf_dir: str):
    port = _free_port()
    conf = os.path.join(conf_dir, f"sentinel-{port}.conf")
    with open(conf, "w") as f:
        f.write(
            f"port {port}\nbind 127.0.0.1\ndir {conf_dir}\n"
            f"sentinel monitor locks 127.0.0.1 {primary_port} 1\n"
            "sentinel down-after-milliseconds locks 1000\n"
        )
    proc = subprocess.Popen(
        [SERVER, conf, "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 10
    while not _pings(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"sentinel did not start on port {port}")
        time.sleep(0.02)
    return port, proc


def test_a_lock_through_a_sentinel_is_held_on_the_groups_primary():
    primary = Server()
    replica = Server(["--replicaof", "127.0.0.1", str(primary.port)])
    with tempfile.TemporaryDirectory() as conf_dir:
        port, sentinel = _sentinel(primary.port, conf_dir)
        try:
            locker = Locker([f"redis+sentinel://127.0.0.1:{port}/locks"], ttl=10.0)
            assert f"127.0.0.1:{port}/locks" in repr(locker)
            with locker.lock("report", wait=5.0) as lock:
                assert inline(primary.port, "LOCK.STATUS report") not in (b"$-1", b"*-1", b"_")
                assert lock.token > 0
            assert inline(primary.port, "LOCK.STATUS report") in (b"$-1", b"*-1", b"_")
            with pytest.raises(ValueError, match="no service name"):
                Locker([f"redis+sentinel://127.0.0.1:{port}"])
        finally:
            sentinel.kill()
            sentinel.wait()
            replica.stop()
            primary.stop()
