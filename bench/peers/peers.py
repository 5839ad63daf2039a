"""Peer drivers for the benchmark: redis-py Lock (N = 1), pottery Redlock and
this repository's Python package (redis_lock_client, built by `make python`;
run with that venv's python).

usage: peers.py quorum URLS ITERATIONS SECONDS    one round, uncontended
       peers.py contention URLS CLIENTS SECONDS   CLIENTS threads, one hot key
Prints one JSON object per client. Timestamps on the monotonic clock.
"role" is "ours" for the package, "peer" otherwise.
"""
import json
import statistics
import sys
import threading
import time

import redis
from pottery import Redlock
from redis_lock_client import Locker, Taken

TTL_S = 10
PACKAGE = "redis-lock-client 0.1.0 (Python)"


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
    locker = Locker(urls, ttl=TTL_S)
    drivers = [
        (PACKAGE, "ours", lambda n: locker.lock(n, auto_renew=False).release()),
        ("pottery 3.0.1 Redlock", "peer", cycles(lambda n: Redlock(key=n, masters=clients, auto_release_time=TTL_S))),
    ]
    if len(urls) == 1:
        drivers.append(("redis-py 5.2.1 Lock", "peer", cycles(lambda n: clients[0].lock(n, timeout=TTL_S))))
    for name, role, cycle in drivers:
        for i in range(50):
            cycle(f"pywarm:{i}")
        lat = []
        for i in range(iterations):
            t = time.perf_counter_ns()
            cycle(f"pylat:{i % 64}")
            lat.append((time.perf_counter_ns() - t) / 1000)
        row = {"client": name, "role": role, "lang": "python", "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}
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


class PackageLock:
    """The package's waiting lock in the acquire(blocking=True)/release shape."""

    def __init__(self, locker, key):
        self.locker, self.key, self.held = locker, key, None

    def acquire(self, blocking=True):
        while True:
            try:
                self.held = self.locker.lock(self.key, wait=30.0, auto_renew=False)
                return True
            except Taken:  # 30 s without the lock: starved, ask again
                continue

    def release(self):
        self.held.release()


def contention(urls, clients, secs):
    rs = [redis.Redis.from_url(u) for u in urls]
    locker = Locker(urls, ttl=TTL_S)
    drivers = []
    if len(urls) == 1:
        drivers.append(("redis-py 5.2.1 Lock (polling, 100 ms)", "peer",
                        lambda: rs[0].lock("pyhot:redis-py", timeout=TTL_S, sleep=0.1)))
    drivers += [
        ("pottery 3.0.1 Redlock (polling, 0-200 ms)", "peer",
         lambda: Redlock(key="pyhot:pottery", masters=rs, auto_release_time=TTL_S)),
        (f"{PACKAGE} lock(wait)", "ours", lambda: PackageLock(locker, "pyhot:package")),
    ]
    for name, role, make in drivers:
        events, mu = [], threading.Lock()
        start = time.monotonic()
        deadline = start + secs

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
        # Over the whole run: every client finishes the section it asked for.
        elapsed = time.monotonic() - start
        events.sort(key=lambda e: e[2])
        handoffs = [(b[2] - a[3]) / 1000 for a, b in zip(events, events[1:]) if a[0] != b[0]]
        waits = [(e[2] - e[1]) / 1e6 for e in events]
        per_client = [0] * clients
        for e in events:
            per_client[e[0]] += 1
        print(json.dumps({
            "client": name,
            "role": role,
            "lang": "python",
            "sections_per_s": len(events) / elapsed,
            "handoff_p50_us": pct(handoffs, 50),
            "handoff_p99_us": pct(handoffs, 99),
            "max_wait_ms": max(waits, default=0),
            "wait_stddev_ms": statistics.pstdev(waits) if waits else 0,
            "min_sections": min(per_client),
        }), flush=True)


if __name__ == "__main__":
    mode, urls, count, secs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
    if mode == "quorum":
        quorum(urls, count, secs)
    else:
        contention(urls, count, secs)
