"""Peer drivers for the benchmark: redis-py Lock (N = 1), pottery Redlock and
this repository's Python package (redis_lock_client, when installed).

usage: peers.py quorum|contention URLS ITERATIONS SECONDS
Prints one JSON object per client. Timestamps on the monotonic clock.
"""
import json
import statistics
import sys
import threading
import time

import redis
from pottery import Redlock

try:  # bindings/python, installed by setup.sh when a Rust toolchain is there
    from redis_lock_client import Locker
except ImportError:
    Locker = None

TTL_S = 10


def pct(samples, p):
    s = sorted(samples)
    return s[round(p / 100 * (len(s) - 1))] if s else 0


def cycles(make_lock):
    """lock + unlock of a name, uncontended."""
    def cycle(name):
        lock = make_lock(name)
        assert lock.acquire(blocking=False)
        lock.release()
    return cycle


def quorum(urls, iterations, secs):
    clients = [redis.Redis.from_url(u) for u in urls]
    drivers = [("pottery 3.0.1 Redlock", cycles(lambda n: Redlock(key=n, masters=clients, auto_release_time=TTL_S)))]
    if Locker is not None:
        locker = Locker(urls, ttl=TTL_S)
        drivers.insert(0, ("redis-lock-client 0.1.0 (Python)", lambda n: locker.lock(n, auto_renew=False).release()))
    if len(urls) == 1:
        drivers.append(("redis-py 5.2.1 Lock", cycles(lambda n: clients[0].lock(n, timeout=TTL_S))))
    for name, cycle in drivers:
        for i in range(50):
            cycle(f"pywarm:{i}")
        lat = []
        for i in range(iterations):
            t = time.perf_counter_ns()
            cycle(f"pylat:{i % 64}")
            lat.append((time.perf_counter_ns() - t) / 1000)
        row = {"client": name, "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}
        for tasks in (1, 16, 64):
            done = [0] * tasks
            deadline = time.monotonic() + secs

            def loop(k):
                while time.monotonic() < deadline:
                    cycle(f"pytput:{k}")
                    done[k] += 1

            threads = [threading.Thread(target=loop, args=(k,)) for k in range(tasks)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            row[f"tput{tasks}"] = sum(done) / secs
        print(json.dumps(row), flush=True)


def contention(url, secs, clients=32):
    r = redis.Redis.from_url(url)
    drivers = [
        ("redis-py 5.2.1 Lock (polling, 100 ms)", lambda: r.lock("pyhot", timeout=TTL_S, sleep=0.1)),
        ("pottery 3.0.1 Redlock (polling, 0-200 ms)", lambda: Redlock(key="pyhot2", masters=[r], auto_release_time=TTL_S)),
    ]
    for name, make in drivers:
        events, mu = [], threading.Lock()
        deadline = time.monotonic() + secs

        def loop(cid):
            lock = make()
            while time.monotonic() < deadline:
                req = time.monotonic_ns()
                lock.acquire(blocking=True)
                acq = time.monotonic_ns()
                rel = time.monotonic_ns()
                lock.release()
                with mu:
                    events.append((cid, req, acq, rel))

        threads = [threading.Thread(target=loop, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events.sort(key=lambda e: e[2])
        handoffs = [(b[2] - a[3]) / 1000 for a, b in zip(events, events[1:]) if a[0] != b[0]]
        waits = [(e[2] - e[1]) / 1e6 for e in events]
        print(json.dumps({
            "client": name,
            "sections_per_s": len(events) / secs,
            "handoff_p50_us": pct(handoffs, 50),
            "handoff_p99_us": pct(handoffs, 99),
            "max_wait_ms": max(waits, default=0),
            "wait_stddev_ms": statistics.pstdev(waits) if waits else 0,
        }), flush=True)


if __name__ == "__main__":
    mode, urls, iterations, secs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
    if mode == "quorum":
        quorum(urls, iterations, secs)
    else:
        contention(urls[0], secs)
