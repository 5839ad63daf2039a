"""A Redis Cluster as one node: Locker(["redis+cluster://seed"])."""

import subprocess
import time

import pytest

from conftest import _free_port
from redis_lock_client import Locker, Taken


def cli(port: int, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-p", str(port), *args],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


@pytest.fixture
def cluster(servers, tmp_path):
    """Three primaries made into one cluster; their ports."""
    for i in range(3):
        # Each node writes its own cluster state file, and its bus gets a
        # free port (port + 10000, the default, may be any client's).
        servers(1, ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                    "--cluster-config-file", str(tmp_path / f"nodes-{i}.conf"),
                    "--cluster-port", str(_free_port())))
    ports = [s.port for s in servers.started]
    created = subprocess.run(
        ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
         "--cluster-replicas", "0", "--cluster-yes"],
        capture_output=True, text=True, check=False)
    assert created.returncode == 0, created.stdout
    deadline = time.monotonic() + 20
    while not all("cluster_state:ok" in cli(p, "CLUSTER", "INFO") for p in ports):
        assert time.monotonic() < deadline, "cluster did not converge"
        time.sleep(0.1)
    return ports


def test_locks_reach_the_primary_of_their_slot(cluster):
    locker = Locker([f"redis+cluster://127.0.0.1:{cluster[0]}/"], ttl=10.0)
    primaries = set()
    for i in range(12):
        name = f"job:{i}"
        with locker.lock(name, wait=2.0) as lock:
            held = [p for p in cluster
                    if lock.owner in cli(p, "LOCK.STATUS", name)]
            assert len(held) == 1, (name, held)
            primaries.add(held[0])
            with pytest.raises(Taken):
                locker.lock(name, wait=0)
        assert all(lock.owner not in cli(p, "LOCK.STATUS", name) for p in cluster)
    assert len(primaries) == 3


def test_a_cluster_url_with_a_database_is_refused(cluster):
    with pytest.raises(ValueError, match="only database 0"):
        Locker([f"redis+cluster://127.0.0.1:{cluster[0]}/1"])
