"""The asyncio API: same shape, and the event loop keeps running."""

import asyncio

import pytest

from redis_lock_client import AsyncLocker, LockLost, Taken


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_async_with_and_contention(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls, ttl=10.0)
        async with locker.lock("report", wait=5.0) as lock:
            assert lock.token > 0 and lock.owner and 0 < lock.validity <= 10
            assert not lock.lost
            with pytest.raises(Taken):
                await locker.lock("report", wait=0)
        assert lock.released
        plain = await locker.lock("report", auto_renew=False)
        await plain.extend(30.0)
        assert plain.ttl == 30.0
        await plain.release()
        return plain.token > lock.token

    assert run(main())


def test_waiting_does_not_block_the_event_loop(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls)
        holder = await locker.lock("busy")
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        async def release_after_ticks():
            while ticks < 5:  # only reachable if the loop runs meanwhile
                await asyncio.sleep(0.01)
            await holder.release()

        ticker = asyncio.create_task(tick())
        releaser = asyncio.create_task(release_after_ticks())
        async with locker.lock("busy", wait=60.0) as lock:
            assert lock.token > holder.token
        await releaser
        ticker.cancel()

    run(main())


def test_tasks_count_exactly(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls)
        count = 0

        async def work():
            nonlocal count
            for _ in range(10):
                async with locker.lock("tasks", wait=60.0):
                    seen = count
                    await asyncio.sleep(0)
                    count = seen + 1

        await asyncio.gather(*(work() for _ in range(5)))
        return count

    assert run(main()) == 50


def test_cancelling_a_wait_leaves_the_holder_alone(servers):
    urls = servers(1)

    async def main():
        locker = AsyncLocker(urls)
        holder = await locker.lock("held")
        waiter = asyncio.create_task(_take(locker))
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not holder.lost
        await holder.release()

    async def _take(locker):
        return await locker.lock("held", wait=60.0)

    run(main())


def test_lost_in_async_with(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls, ttl=1.0)
        with pytest.raises(LockLost):
            async with locker.lock("fragile") as lock:
                for server in servers.started[:2]:
                    server.stop()
                for _ in range(600):
                    if lock.lost:
                        break
                    await asyncio.sleep(0.05)
                assert lock.lost

    run(main())


def test_an_async_block_that_outlived_its_validity_raises_lock_lost(servers):
    urls = servers(3)

    async def main():
        locker = AsyncLocker(urls, ttl=0.5, drift_factor=0.2)  # 100 ms to release
        # "ran out of validity" (the release still found it), or, on a slow
        # machine, "expired" (the servers' TTL passed too): lost either way.
        with pytest.raises(LockLost, match="validity|expired"):
            async with locker.lock("late", wait=0, auto_renew=False) as lock:
                await asyncio.sleep(lock.validity + 0.002)
                assert lock.lost

    run(main())


def test_bad_arguments_raise_at_the_await(servers):
    async def main():
        locker = AsyncLocker(["redis://127.0.0.1:1"])
        with pytest.raises(ValueError, match="name"):
            await locker.lock("")
        with pytest.raises(TypeError):
            await locker.lock("x", wait="soon")

    run(main())
    with pytest.raises(ValueError):
        AsyncLocker([])


def test_asyncio_programs_exit_cleanly(servers):
    # cd2a77a: a runtime thread still in its callback into Python when the
    # interpreter began to finalize aborted the process ("Fatal Python
    # error: PyGILState_Release", exit 134), in about 1 run in 4 when a few
    # run at once. 30 short programs, 6 at a time, must all exit 0.
    import subprocess
    import sys

    url = servers(1)[0]
    program = (
        "import asyncio, sys\n"
        "from redis_lock_client import AsyncLocker\n"
        "async def main():\n"
        "    async with AsyncLocker([sys.argv[1]]).lock(sys.argv[2], wait=5.0) as lock:\n"
        "        await lock.extend()\n"
        "asyncio.run(main())\n"
    )
    for round_ in range(5):
        runs = [
            subprocess.Popen([sys.executable, "-c", program, url, f"exit{k}"], stderr=subprocess.PIPE)
            for k in range(6)
        ]
        for run in runs:
            _, err = run.communicate(timeout=60)
            assert run.returncode == 0, f"round {round_}: exit {run.returncode}: {err.decode()[:300]}"


def test_exit_right_after_a_cancelled_wait_is_prompt_and_leaves_nothing(servers):
    # At exit the package waits (at most 2 s) for the clean-up of given-up
    # acquisitions before it stops its callbacks: no hang, nothing held.
    import subprocess
    import sys
    import time

    from conftest import inline

    urls = servers(3)
    ports = [s.port for s in servers.started]
    for port in ports:
        assert inline(port, "LOCK.ACQUIRE busy holder 30000").startswith(b":")
    program = (
        "import asyncio, sys\n"
        "from redis_lock_client import AsyncLocker\n"
        "async def main():\n"
        "    locker = AsyncLocker(sys.argv[1].split(','))\n"
        "    try:\n"
        "        await asyncio.wait_for(locker.lock('busy', wait=30.0), 0.2)\n"
        "    except asyncio.TimeoutError:\n"
        "        pass\n"
        "asyncio.run(main())\n"
    )
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", program, ",".join(urls)], capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr.decode()[:300]
    assert time.monotonic() - started < 5
    # The holder still holds it, and once it lets go nobody is handed it:
    # the exited waiter left no WAIT queued behind it. (A short holder TTL
    # instead could run out while the child starts on a loaded machine.)
    for port in ports:
        assert inline(port, "LOCK.RELEASE busy holder") == b":1"
        assert inline(port, "LOCK.STATUS busy") in (b"$-1", b"*-1", b"_"), "handed to the exited waiter"
