"""Shared holds and limits: lock(name, shared=True) and lock(name, limit=n),
sync and asyncio, against real servers."""

import asyncio
import time

import pytest

from conftest import inline
from redis_lock_client import AsyncLocker, Locker, LockLost, Rejected, Taken


def test_readers_hold_together_and_a_writer_is_kept_out(servers):
    urls = servers(3)
    locker = Locker(urls, ttl=10.0)
    with locker.lock("table", shared=True) as r1, locker.lock("table", shared=True) as r2:
        assert r1.token != r2.token and r1.shared and r1.limit is None
        with pytest.raises(Taken):
            locker.lock("table")
        status = locker.status("table")
        assert status.state == "shared" and not status.held and status.owner is None
        # In any order: a grant still on its way to one server can land
        # there after the next holder's (seen in a fresh-clone make test).
        assert sorted(status.holders) == sorted([(r1.owner, 3), (r2.owner, 3)])
        assert (status.limit, status.servers, status.of) == (None, 3, 3)
        assert "holders=" in repr(status)
    assert r1.released and r2.released
    assert locker.status("table").state == "free"
    with locker.lock("table"):
        with pytest.raises(Taken):
            locker.lock("table", shared=True)


def test_a_limit_of_two_on_three_servers(servers):
    urls = servers(3)
    locker = Locker(urls, ttl=10.0)
    a = locker.lock("pool", limit=2)
    b = locker.lock("pool", limit=2)
    assert (b.shared, b.limit) == (True, 2)
    with pytest.raises(Taken):
        locker.lock("pool", limit=2)
    status = locker.status("pool")
    assert status.limit == 2 and sorted(o for o, _ in status.holders) == sorted([a.owner, b.owner])
    with pytest.raises(Rejected):
        locker.lock("pool", limit=3)
    a.release()
    with locker.lock("pool", limit=2, wait=5.0):
        pass
    b.release()
    for bad in (0, 2**31):
        with pytest.raises(ValueError):
            locker.lock("pool", limit=bad)
    with pytest.raises(TypeError):
        locker.lock("pool", limit=True)


def test_a_limited_hold_taken_away_on_one_server_is_lost(servers):
    # A limit of 2 on 3 servers needs all 3: losing one is losing the lock.
    urls = servers(3)
    locker = Locker(urls, ttl=1.0)
    with pytest.raises(LockLost):
        with locker.lock("slots", limit=2) as lock:
            port = servers.started[0].port
            assert inline(port, f"LOCK.RELEASE slots {lock.owner}") == b":1"
            deadline = time.monotonic() + 30
            while not lock.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lock.lost


def test_asyncio_shared_and_limited(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls, ttl=10.0)
        async with locker.lock("doc", shared=True) as r1:
            async with locker.lock("doc", shared=True) as r2:
                assert r2.shared and r2.limit is None
                with pytest.raises(Taken):
                    await locker.lock("doc")
                status = await locker.status("doc")
                assert sorted(o for o, _ in status.holders) == sorted([r1.owner, r2.owner])
        # Four tasks under a limit of 2: never more than two inside.
        inside, most = 0, 0

        async def worker():
            nonlocal inside, most
            async with locker.lock("slots", limit=2, wait=30.0):
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.1)
                inside -= 1

        await asyncio.gather(*(worker() for _ in range(4)))
        return most

    assert asyncio.run(asyncio.wait_for(main(), 120)) <= 2
