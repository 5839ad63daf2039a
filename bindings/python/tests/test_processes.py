"""Several processes on one lock name. Children are forked (Linux's
default), so each makes its own Locker; one inherited from the parent
must refuse to work."""

import multiprocessing

import pytest

from redis_lock_client import Locker, Taken

fork = multiprocessing.get_context("fork")


def _race(urls, start, done, results):
    locker = Locker(urls)
    start.wait()
    try:
        lock = locker.lock("race", wait=0, auto_renew=False)
        results.put(("won", lock.token))
        done.wait()  # hold it until every racer has tried
        lock.release()
    except Taken:
        results.put(("taken", None))


def test_two_processes_racing_exactly_one_wins(servers):
    urls = servers(3)
    start, done, results = fork.Barrier(2), fork.Event(), fork.Queue()
    racers = [fork.Process(target=_race, args=(urls, start, done, results)) for _ in range(2)]
    for p in racers:
        p.start()
    outcomes = sorted(results.get(timeout=60)[0] for _ in racers)
    done.set()
    for p in racers:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert outcomes == ["taken", "won"]


def _increment(urls, path, times):
    locker = Locker(urls)
    for _ in range(times):
        with locker.lock("counter", wait=120.0):
            value = int(path.read_text())
            path.write_text(str(value + 1))


def test_eight_processes_count_exactly(servers, counter_file):
    urls = servers(3)
    Locker(urls).lock("warm-up").release()  # the parent has a runtime to inherit
    workers = [fork.Process(target=_increment, args=(urls, counter_file, 15)) for _ in range(8)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=300)
        assert p.exitcode == 0
    assert int(counter_file.read_text()) == 8 * 15


def _use_inherited(locker, lock, results):
    for call in (lambda: locker.lock("x"), lock.release):
        try:
            call()
            results.put("worked")
        except RuntimeError as e:
            results.put(str(e))


def test_a_forked_child_does_not_inherit_a_working_locker(servers):
    locker = Locker(servers(1))
    lock = locker.lock("parent")
    results = fork.Queue()
    child = fork.Process(target=_use_inherited, args=(locker, lock, results))
    child.start()
    messages = [results.get(timeout=60) for _ in range(2)]
    child.join(timeout=60)
    for message in messages:
        assert "forked child" in message and "create a new Locker" in message
    # The child's attempts did not disturb the parent's lock.
    assert not lock.lost
    lock.release()


@pytest.fixture(autouse=True)
def _no_leftover_children():
    yield
    for p in multiprocessing.active_children():
        p.kill()


def test_a_child_forked_during_a_callback_exits(servers):
    # c8f4c87: a child forked while a runtime thread was in (or waiting to
    # enter) its callback into Python inherited that thread's hold on the
    # exit gate, and hung at exit waiting for a thread it does not have.
    import subprocess
    import sys

    url = servers(1)[0]
    program = r"""
import os, sys, time
from redis_lock_client import Locker
locker = Locker([sys.argv[1]], ttl=5.0)
sys.setswitchinterval(2.0)  # keep the GIL: the callback waits for it
hung = 0
for i in range(5):
    locker._acquisition(f"fork{i}", 0.0, auto_renew=False)._start(lambda result, error: None)
    until = time.time() + 0.2
    while time.time() < until:
        pass
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # a normal exit: atexit hooks run
    deadline = time.time() + 5
    while time.time() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.01)
    else:
        hung += 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)
print(hung)
"""
    run = subprocess.run([sys.executable, "-c", program, url], capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode()[:300]
    assert run.stdout.decode().strip() == "0", "children hung at exit"


def _run_program(program, *args, timeout=30):
    import subprocess
    import sys
    import time

    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", program, *args], capture_output=True, timeout=timeout)
    return run, time.monotonic() - started


# A program whose daemon thread waits `wait` s for `name`, held by another
# Locker of it (servers' URLs in argv[1]).
_WAIT_IN_A_THREAD = """
import os, sys, threading, time
from redis_lock_client import Locker
urls = sys.argv[1].split(",")
holder = Locker(urls).lock("{name}", wait=0, ttl=30.0)
waiter = Locker(urls)
threading.Thread(target=lambda: waiter.lock("{name}", wait={wait}), daemon=True).start()
time.sleep(0.3)
"""


def test_exit_does_not_wait_for_a_wait_whose_caller_is_still_there(servers):
    # 7818b9e: a daemon thread blocked in lock(wait=30) held every exit for
    # the 2 s the exit hook gives background clean-up; it is not clean-up.
    urls = servers(3)
    import time

    # The program prints when its last line ran: the exit alone is timed,
    # not the interpreter's start (slow on a loaded machine).
    program = _WAIT_IN_A_THREAD.format(name="busy-exit", wait=30.0) + "print(time.monotonic())\n"
    run, _ = _run_program(program, ",".join(urls))
    exited = time.monotonic()
    assert run.returncode == 0, run.stderr.decode()[:300]
    took = exited - float(run.stdout.decode().split()[-1])
    assert took < 1.5, f"exit took {took:.2f} s"


def test_a_forked_child_does_not_wait_for_its_parents_clean_up(servers):
    # 7818b9e: the child inherited the parent's count of background work
    # (a wait in another thread) and its exit waited the full 2 s for it.
    urls = servers(3)
    program = _WAIT_IN_A_THREAD.format(name="busy-fork", wait=8.0) + r"""
pid = os.fork()
if pid == 0:
    child = Locker(urls)
    child.lock("free-in-child", wait=0, auto_renew=False).release()
    sys.exit(0)
t = time.monotonic()
os.waitpid(pid, 0)
print(round(time.monotonic() - t, 2))
os._exit(0)
"""
    run, _ = _run_program(program, ",".join(urls))
    assert run.returncode == 0, run.stderr.decode()[:300]
    assert float(run.stdout.decode().strip()) < 1.5, f"child exit took {run.stdout.decode().strip()} s"


def test_an_asyncio_call_in_a_late_exit_hook_raises_instead_of_hanging(servers):
    # 7818b9e: an atexit hook registered before the package was imported
    # runs after the package's own; its asyncio call waited forever for a
    # callback the closed gate would never run.
    url = servers(1)[0]
    program = r"""
import atexit, asyncio, sys
url = sys.argv[1]
def hook():
    async def late():
        from redis_lock_client import AsyncLocker
        async with AsyncLocker([url]).lock("late-hook"):
            pass
    try:
        asyncio.run(late())
    except RuntimeError as e:
        print("refused:", e)
atexit.register(hook)
from redis_lock_client import Locker
Locker([url]).lock("early", wait=0, auto_renew=False).release()
"""
    run, _ = _run_program(program, url, timeout=20)
    assert run.returncode == 0, run.stderr.decode()[:300]
    assert "interpreter is exiting" in run.stdout.decode(), run.stdout.decode()


def test_a_lock_dropped_right_before_exit_is_released_by_then(servers):
    # 5171401: the release of a dropped Lock ran as a plain task the exit
    # hook did not wait for; with the servers answering a little late
    # (a write pause here, a slow fsync or failover in production) the
    # process exited first and the lock stayed held for its 20 s TTL.
    import subprocess
    import sys

    from conftest import inline

    urls = servers(3)
    ports = [s.port for s in servers.started]
    program = r"""
import sys
from redis_lock_client import Locker
lock = Locker(sys.argv[1].split(","), ttl=20.0).lock("dropx", auto_renew=False)
print("held", flush=True)
sys.stdin.readline()
del lock  # the last reference: released in the background
"""
    child = subprocess.Popen(
        [sys.executable, "-c", program, ",".join(urls)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"held\n", child.stderr.read().decode()[:300]
        for port in ports:
            assert inline(port, "CLIENT PAUSE 300 WRITE") == b"+OK"
        child.stdin.write(b"go\n")
        child.stdin.flush()
        assert child.wait(timeout=20) == 0, child.stderr.read().decode()[:300]
    finally:
        child.kill()
    for port in ports:
        assert inline(port, "LOCK.STATUS dropx") in (b"$-1", b"*-1", b"_"), f"still held on {port}"


def test_a_lock_in_a_module_global_is_released_at_a_normal_exit(servers):
    # Module globals are destroyed after the atexit hooks: the release of a
    # lock still held then is waited for (at most 2 s), so a normal exit
    # leaves nothing held (issue 25: the README said it expires with its TTL).
    import subprocess
    import sys

    from conftest import inline

    urls = servers(3)
    program = (
        "import sys\n"
        "from redis_lock_client import Locker\n"
        "lock = Locker(sys.argv[1].split(','), ttl=60.0).lock('global', wait=5.0)\n"
        "print(lock.owner)\n"
    )
    for _ in range(3):
        run = subprocess.run([sys.executable, "-c", program, ",".join(urls)], capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr.decode()[:300]
        for server in servers.started:
            assert inline(server.port, "LOCK.STATUS global") in (b"$-1", b"*-1", b"_"), "left held at exit"
