"""Distributed locks over Redis/Valkey servers running the redis-lock module.

A thin binding of the Rust crate ``redis-lock-client`` (the Redlock quorum
algorithm with fencing tokens and auto-renewal)::

    from redis_lock_client import Locker, Taken, NoQuorum, LockLost
    locker = Locker(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
                     "redis://127.0.0.1:7003"], ttl=10.0)
    with locker.lock("report", wait=5.0) as lock:
        ...  # lock.token, lock.owner, lock.validity, lock.lost

``AsyncLocker`` is the same for asyncio (``async with locker.lock(...)``).
``locker.status(name)`` says who holds a lock; ``@locker.synchronized(name)``
runs a function (sync or async) under it.
A Locker does not survive ``fork()``: create one in each process.
"""

import atexit
import os
from typing import Any, Callable, Optional, TypeVar, Union

from . import _native
from ._native import __version__, Lock, LockError, LockLost, LockStatus, NoQuorum, Rejected, Taken, close_gate, gate_after_fork
from ._aio import AsyncLock, AsyncLocker, _synchronized

F = TypeVar("F", bound=Callable[..., Any])


class Locker(_native.Locker):
    __doc__ = _native.Locker.__doc__
    __slots__ = ()

    def synchronized(self, name: Union[str, bytes], wait: Optional[float] = 0.0, **options: Any) -> Callable[[F], F]:
        """Decorator: each call of the function runs holding ``name``,
        taken with ``wait`` and ``options`` as ``lock()`` takes them (bad
        arguments raise here, at decoration). For a plain function the call
        blocks while it waits; for an ``async def`` function it waits
        without blocking the event loop::

            @locker.synchronized("nightly-report", wait=30.0)
            def report(): ...

        Raises what ``lock()`` raises (Taken when ``wait`` ran out, ...),
        and LockLost after the function returned if the lock was lost while
        it ran."""
        return _synchronized(self, name, wait, options)

__all__ = [
    "Locker",
    "Lock",
    "LockStatus",
    "AsyncLocker",
    "AsyncLock",
    "LockError",
    "Taken",
    "NoQuorum",
    "LockLost",
    "Rejected",
]

# Before the interpreter finalizes, let the runtime's callbacks into Python
# finish and stop new ones (an asyncio program could abort at exit).
atexit.register(close_gate)
# A forked child has none of the parent's runtime threads (nor their count).
os.register_at_fork(after_in_child=gate_after_fork)
