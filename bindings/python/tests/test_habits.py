"""What a redis-py Lock user does by habit (issue 25, 2026-11-28): re-entering
a lock object, a released lock, typos in the server list, argument shapes,
a wait during an outage, status() and synchronized."""

import asyncio
import gc
import threading
import time
import typing
import warnings

import pytest

from conftest import inline
from redis_lock_client import AsyncLock, AsyncLocker, Locker, LockLost, NoQuorum, Taken


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


# 1. A lock object used twice.


def test_entering_a_released_lock_takes_it_again(servers):
    urls = servers(3)
    locker, other = Locker(urls), Locker(urls)
    lock = locker.lock("twice", wait=5.0)
    tokens = []
    for _ in range(2):
        with lock:
            assert not lock.released and not lock.lost and lock.validity > 0
            with pytest.raises(Taken):
                other.lock("twice")  # the second block runs under the lock too
            tokens.append(lock.token)
        assert lock.released
    assert tokens[1] > tokens[0]
    other.lock("twice").release()


def test_a_lock_inside_a_with_block_cannot_be_entered_again(servers):
    locker = Locker(servers(1))
    with locker.lock("nested") as lock:
        with pytest.raises(RuntimeError, match="not reentrant"):
            with lock:
                pass
        assert not lock.released, "the refused inner block did not release it"
    assert lock.released


def test_entering_again_waits_as_the_first_call_did(servers):
    urls = servers(1)
    locker = Locker(urls)
    lock = locker.lock("again", wait=0)
    lock.release()
    holder = Locker(urls).lock("again")
    with pytest.raises(Taken):
        with lock:  # wait=0, as first taken
            pytest.fail("entered a lock another owner holds")
    holder.release()
    with lock:
        assert not lock.released


def test_async_with_twice_on_an_async_lock_takes_it_again(servers):
    urls = servers(3)

    async def main():
        locker, other = AsyncLocker(urls), AsyncLocker(urls)
        lock = await locker.lock("twice-async", wait=5.0)
        tokens = []
        for _ in range(2):
            async with lock:
                assert not lock.released and lock.validity > 0
                with pytest.raises(Taken):
                    await other.lock("twice-async")
                tokens.append(lock.token)
            assert lock.released
        assert tokens[1] > tokens[0]

    run(main())


# 2. A released lock no longer looks alive; LockLost says what happened.


def test_a_released_lock_reads_released(servers):
    locker = Locker(servers(3))
    lock = locker.lock("done", auto_renew=False)
    lock.release()
    assert lock.released and lock.validity == 0.0
    with pytest.raises(RuntimeError, match="released"):
        lock.extend()
    with pytest.raises(RuntimeError, match="released"):
        lock.release()

    async def main():
        alock = await AsyncLocker(locker.urls).lock("done-async", auto_renew=False)
        await alock.release()
        assert alock.validity == 0.0
        with pytest.raises(RuntimeError, match="released"):
            await alock.extend()
        with pytest.raises(RuntimeError, match="released"):
            await alock.release()

    run(main())


def test_lock_lost_says_it_expired(servers):
    locker = Locker(servers(1), ttl=0.2)
    lock = locker.lock("short", auto_renew=False)
    time.sleep(0.4)
    with pytest.raises(LockLost, match="expired.*validity ran out"):
        lock.extend()


def test_lock_lost_says_it_was_taken_by_another_owner(servers):
    urls = servers(1)
    lock = Locker(urls, ttl=0.2).lock("short", auto_renew=False)
    other = Locker(urls).lock("short", wait=10.0)
    with pytest.raises(LockLost, match="taken by another owner") as lost:
        lock.extend()
    assert other.owner in str(lost.value)


def test_lock_lost_says_it_was_released_by_someone_else(servers):
    urls = servers(3)
    lock = Locker(urls).lock("freed", auto_renew=False)
    # lock() returns at a majority: the last server's grant may still be on
    # its way (a fresh-clone run on Valkey, 2026-11-29, got -1 from one).
    for server in servers.started:
        deadline = time.monotonic() + 2
        while True:
            got = inline(server.port, f"LOCK.RELEASE freed {lock.owner}")
            if got == b":1" or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert got == b":1"
    with pytest.raises(LockLost, match="released by someone else"):
        lock.release()


# 3. A host name that does not exist.


def test_a_host_that_does_not_exist_is_refused(servers):
    urls = servers(2)
    with pytest.raises(ValueError, match="no-such-host.invalid"):
        Locker(["redis://no-such-host.invalid:6390", *urls])
    with pytest.raises(ValueError, match="no-such-host.invalid"):
        AsyncLocker([*urls, "redis://no-such-host.invalid:6390"])


# 4. Argument shapes.


def test_one_url_string_is_one_server(servers):
    url = servers(1)[0]
    locker = Locker(url)
    assert locker.urls == [url]
    with locker.lock("one") as lock:
        assert lock.token > 0
    assert AsyncLocker(url).urls == [url]


def test_wait_none_is_no_limit(servers):
    urls = servers(3)
    locker = Locker(urls)
    holder = locker.lock("forever")
    threading.Timer(0.3, holder.release).start()
    with locker.lock("forever", wait=None) as lock:
        assert lock.token > holder.token


def test_names_as_bytes(servers):
    locker = Locker(servers(1))
    with locker.lock(b"report") as lock:
        assert lock.name == "report"
        with pytest.raises(Taken):
            locker.lock("report")
    with pytest.raises(ValueError, match="UTF-8"):
        locker.lock(b"\xff")


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: Locker(["redis://127.0.0.1:1"], ttl=True), TypeError, "ttl"),
        (lambda: Locker(["redis://127.0.0.1:1"]).lock("x", ttl=True), TypeError, "ttl"),
        (lambda: Locker(["redis://127.0.0.1:1"]).lock("x", wait=True), TypeError, "wait"),
        (lambda: Locker(["redis://127.0.0.1:1"], retry_count=True), TypeError, "retry_count"),
        (lambda: Locker(["redis://127.0.0.1:1"], ttl=0), ValueError, "> 0"),
        (lambda: Locker(["redis://127.0.0.1:99999"]), ValueError, "port 99999"),
        (lambda: Locker(["redis://127.0.0.1:99999"]), ValueError, "redis://127.0.0.1:99999"),
        (lambda: Locker(["127.0.0.1:6390"]), ValueError, "no scheme"),
        (lambda: Locker(["127.0.0.1:6390"]), ValueError, "127.0.0.1:6390"),
        (lambda: Locker(["http://127.0.0.1:6390"]), ValueError, "scheme \"http\""),
    ],
)
def test_argument_errors_say_what_is_wrong(make, error, words):
    with pytest.raises(error) as raised:
        make()
    assert words in str(raised.value)
    assert "InvalidClientConfig" not in str(raised.value)


# 5. A wait during an outage.


@pytest.mark.parametrize("how", [{}, {"owner": "me"}, {"reentrant": True}])
def test_a_wait_ends_with_no_quorum_when_a_majority_is_down(servers, how):
    urls = servers(3)
    for server in servers.started[:2]:
        server.stop()  # their ports now refuse connections
    locker = Locker(urls)
    started = time.monotonic()
    with pytest.raises(NoQuorum) as outage:
        locker.lock("outage", wait=60.0, **how)
    # Not the 60 s wait: the outage is said as the wait begins.
    assert time.monotonic() - started < 30
    down = {u.removeprefix("redis://") for u in urls[:2]}
    assert down <= {node for node, _cause in outage.value.failures}


# 6. asyncio, and the errors' details.


def test_an_acquisition_never_awaited_warns():
    locker = AsyncLocker(["redis://127.0.0.1:1"])
    with pytest.warns(RuntimeWarning, match="never awaited"):
        locker.lock("forgotten")
        gc.collect()


def test_bad_async_arguments_raise_at_the_call():
    locker = AsyncLocker(["redis://127.0.0.1:1"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing made that warns later
        with pytest.raises(ValueError, match="name"):
            locker.lock("")
        with pytest.raises(TypeError, match="wait"):
            locker.lock("x", wait="soon")
        gc.collect()


def test_async_lock_attributes_are_typed():
    hints = {name: typing.get_type_hints(getattr(AsyncLock, name).fget)["return"]
             for name in ("name", "owner", "token", "ttl", "validity", "lost", "released", "auto_renew")}
    assert hints == {"name": str, "owner": str, "token": int, "ttl": float, "validity": float,
                     "lost": bool, "released": bool, "auto_renew": bool}


def test_repr_cuts_a_long_name(servers):
    locker = Locker(servers(1))
    name = "n" * 100_000
    with locker.lock(name) as lock:
        assert len(repr(lock)) < 300 and "100000 characters" in repr(lock)
        with pytest.raises(Taken) as taken:
            locker.lock(name)
        assert len(str(taken.value)) < 300


def test_no_quorum_says_the_same_with_or_without_a_wait(servers):
    # The wait no longer changes the path: the outage is said by the first
    # round (or a probe) either way, with the same servers failing. (How
    # many grants came before the call gave up still depends on which
    # replies came first: below a majority, and given back.)
    urls = servers(3)
    for server in servers.started[:2]:
        server.stop()
    locker = Locker(urls)
    seen = set()
    for wait, how in [(0.0, {}), (5.0, {}), (5.0, {"owner": "me"}), (5.0, {"reentrant": True})]:
        with pytest.raises(NoQuorum) as outage:
            locker.lock("outage", wait=wait, **how)
        err = outage.value
        assert 0 <= err.granted < err.needed == 2
        seen.add(tuple(sorted(node for node, _cause in err.failures)))
    assert seen == {tuple(sorted(u.removeprefix("redis://") for u in urls[:2]))}


def test_taken_says_how_long_it_waited(servers):
    locker = Locker(servers(1))
    with locker.lock("busy"):
        with pytest.raises(Taken, match=r"waited \d+\.\d+ s") as taken:
            locker.lock("busy", wait=0.2)
        assert taken.value.waited >= 0.2


# 7. status() and synchronized.


def test_status_says_who_holds_a_lock(servers):
    urls = servers(3)
    locker = Locker(urls, ttl=10.0)
    free = locker.status("report")
    assert (free.state, free.held, free.owner, free.servers, free.of) == ("free", False, None, 3, 3)
    with locker.lock("report") as lock:
        held = locker.status(b"report")
        assert held.held and held.state == "held"
        assert (held.owner, held.token, held.servers, held.of) == (lock.owner, lock.token, 3, 3)
        assert 0 < held.validity <= 10.0
        assert "held" in repr(held)
    servers.started[0].stop()
    servers.started[1].stop()
    down = locker.status("report")
    assert down.state == "unreachable" and len(down.failures) == 2

    async def main():
        return await AsyncLocker(urls).status("report")

    assert run(main()).state == "unreachable"


def test_synchronized_runs_each_call_under_the_lock(servers):
    urls = servers(3)
    locker = Locker(urls)
    count = {"n": 0}

    @locker.synchronized("counted", wait=60.0)
    def add():
        seen = count["n"]
        time.sleep(0)
        count["n"] = seen + 1
        return "done"

    threads = [threading.Thread(target=lambda: [add() for _ in range(10)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count["n"] == 30 and add() == "done" and add.__name__ == "add"
    with Locker(urls).lock("counted"):
        with pytest.raises(Taken):
            locker.synchronized("counted")(lambda: None)()
    with pytest.raises(ValueError):
        locker.synchronized("")  # bad arguments raise at decoration


def test_synchronized_async_functions(servers):
    urls = servers(3)

    async def main():
        for locker in (Locker(urls), AsyncLocker(urls)):
            count = 0

            @locker.synchronized("counted-async", wait=60.0)
            async def add():
                nonlocal count
                seen = count
                await asyncio.sleep(0)
                count = seen + 1

            await asyncio.gather(*(add() for _ in range(10)))
            assert count == 10

    run(main())


# 8. Two handles with one explicit owner are one holder (documented).


def test_two_handles_with_one_owner_are_one_holder(servers):
    # The servers see one owner: the second lock() refreshes the TTL, and
    # either release frees the name for both. The other handle then learns
    # it from LockLost, which says the lock was released by someone else.
    urls = servers(3)
    locker = Locker(urls)
    first = locker.lock("shared-owner", owner="worker-1", auto_renew=False)
    second = locker.lock("shared-owner", owner="worker-1", auto_renew=False)
    assert second.token >= first.token
    second.release()
    assert locker.status("shared-owner").state == "free"
    with pytest.raises(LockLost, match="released by someone else.*same owner"):
        first.extend()
