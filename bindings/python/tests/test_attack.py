"""Python habits that broke the re-entering rules (2026-11-28): a
cancelled `async with` of a lock being taken again, and more."""

import asyncio

import pytest

from redis_lock_client import AsyncLocker, Locker, Taken


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_a_cancelled_reentry_can_be_entered_again(servers):
    """`async with lock` of a released lock waits to take it again; the
    task is cancelled (a timeout) while it waits. The lock is not inside a
    block: entering it later takes it, instead of RuntimeError ("already
    inside a `with` block") for good."""
    urls = servers(1)

    async def main():
        locker = AsyncLocker(urls)
        lock = await locker.lock("cancelled-reentry", wait=30.0)
        await lock.release()
        holder = Locker(urls).lock("cancelled-reentry")

        async def enter():
            async with lock:
                pytest.fail("entered a lock another owner holds")

        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(enter(), 0.5)
        holder.release()
        async with lock:
            assert not lock.released and lock.validity > 0

    run(main())
