"""Python habits that broke the re-entering rules (2026-11-28): a
cancelled `async with` of a lock being taken again, and more."""

import asyncio

import pytest

from redis_lock_client import AsyncLocker, Locker, LockLost, Taken


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


def test_synchronized_holds_the_lock_while_a_generator_runs(servers):
    """A synchronized generator function: its body runs when iterated, after
    the call returned. The lock is held from the first item to the end."""
    urls = servers(1)
    locker, other = Locker(urls), Locker(urls)

    @locker.synchronized("sync-generator")
    def items():
        for i in range(3):
            yield i

    produced = items()
    assert next(produced) == 0
    with pytest.raises(Taken):
        other.lock("sync-generator")
    assert list(produced) == [1, 2]
    other.lock("sync-generator").release()  # free once it ended


def test_synchronized_holds_the_lock_while_an_async_generator_runs(servers):
    urls = servers(1)

    async def main():
        locker, other = AsyncLocker(urls), AsyncLocker(urls)

        @locker.synchronized("async-generator")
        async def items():
            for i in range(3):
                yield i

        produced = items()
        assert await produced.__anext__() == 0
        with pytest.raises(Taken):
            await other.lock("async-generator")
        assert [i async for i in produced] == [1, 2]
        await (await other.lock("async-generator")).release()

    run(main())


def test_a_synchronized_async_generator_passes_on_what_is_sent_and_thrown(servers):
    urls = servers(1)

    async def main():
        locker = AsyncLocker(urls)

        @locker.synchronized("async-echo")
        async def echo():
            got = None
            try:
                while True:
                    got = yield got
            except ValueError:
                yield "thrown"

        produced = echo()
        assert await produced.asend(None) is None
        assert await produced.asend(5) == 5
        assert await produced.athrow(ValueError()) == "thrown"
        await produced.aclose()
        assert (await locker.status("async-echo")).state == "free"

    run(main())


def test_a_time_too_large_is_named_short():
    """`ttl=1e300` said "ttl is too large: 1000...000 seconds" with all
    301 digits."""
    with pytest.raises(ValueError) as raised:
        Locker("redis://127.0.0.1:1").lock("x", ttl=1e300)
    assert "1e300" in str(raised.value), str(raised.value)


def test_one_acquisition_shared_by_tasks_releases_each_tasks_own_lock(servers):
    """`job = alocker.lock(...)` made once and entered by several tasks, as
    an asyncio.Lock is. Task A's lock expires inside its block and task B
    takes the lock; A leaving its block released B's lock (the last one
    taken through the shared object) and said nothing of its own loss."""
    urls = servers(1)

    async def main():
        locker = AsyncLocker(urls)
        job = locker.lock("shared-acquisition", wait=30.0, ttl=1.0, auto_renew=False)
        b_inside, a_left = asyncio.Event(), asyncio.Event()
        seen = {}

        async def a():
            try:
                async with job:
                    await b_inside.wait()  # A's lock expired: B has it
            except LockLost:
                seen["a lost"] = True
            finally:
                a_left.set()

        async def b():
            async with job as lock:
                b_inside.set()
                await a_left.wait()
                status = await locker.status("shared-acquisition")
                seen["owner"], seen["mine"] = status.owner, lock.owner

        task_a = asyncio.ensure_future(a())
        await asyncio.sleep(0)  # A enters first
        while (await locker.status("shared-acquisition")).state != "held":
            await asyncio.sleep(0.01)
        await asyncio.gather(task_a, b())
        assert seen["owner"] == seen["mine"], "B still holds its lock after A left"
        assert seen.get("a lost"), "A's block ends with LockLost: its lock expired"

    run(main())


def test_exit_waits_at_most_two_seconds_for_all_global_locks_together(servers):
    """Twenty locks in a module global and the server stopped (SIGSTOP) at
    the end of the program: the exit waited a node timeout per lock (over
    10 s); the 2 s it gives their releases are one budget for all."""
    import signal
    import subprocess
    import sys
    import time

    urls = servers(1)
    server = servers.started[0]
    program = (
        "import os, sys, time\n"
        "from redis_lock_client import Locker\n"
        "LOCKS = [Locker(sys.argv[1]).lock(f'exit-{i}') for i in range(20)]\n"
        "os.kill(int(sys.argv[2]), 19)\n"  # SIGSTOP
        "print(time.monotonic(), flush=True)\n"
    )
    try:
        run = subprocess.run(
            [sys.executable, "-c", program, urls[0], str(server.proc.pid)], capture_output=True, timeout=120
        )
        exited = time.monotonic()
    finally:
        server.proc.send_signal(signal.SIGCONT)
    assert run.returncode == 0, run.stderr.decode()[:300]
    took = exited - float(run.stdout.decode().split()[-1])
    assert took < 6.0, f"exit took {took:.2f} s"


def test_an_acquisition_left_from_another_task_releases_its_lock(servers):
    """An AsyncExitStack entered in one task and closed in another."""
    import contextlib

    urls = servers(1)

    async def main():
        locker = AsyncLocker(urls)
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(locker.lock("exit-elsewhere"))
        await asyncio.ensure_future(stack.aclose())
        assert (await locker.status("exit-elsewhere")).state == "free"

    run(main())


def test_a_release_retried_after_one_that_landed_late_succeeds(servers):
    # 2026-11-29 (found in the Node package, which shares the pattern): the
    # first release timed out (servers paused) and its RELEASEs ran once
    # they went on; the retry found the key gone and raised LockLost,
    # marking a lock its holder had let go as lost.
    import time

    from conftest import inline
    from redis_lock_client import NoQuorum

    urls = servers(3)
    ports = [int(u.rsplit(":", 1)[1].strip("/")) for u in urls]
    locker = Locker(urls, ttl=10.0, node_timeout=0.2)
    for auto_renew in (True, False):
        name = f"lock:late-release:{auto_renew}"
        lock = locker.lock(name, auto_renew=auto_renew)
        for port in ports:
            inline(port, "CLIENT PAUSE 1000 ALL")
        with pytest.raises(NoQuorum):
            lock.release()
        deadline = time.monotonic() + 5
        while any(inline(p, f"LOCK.STATUS {name}") not in (b"$-1", b"*-1", b"_") for p in ports):
            assert time.monotonic() < deadline, "the paused RELEASEs never ran"
            time.sleep(0.02)
        lock.release()
        assert lock.released
        assert not lock.lost
