"""Distributed locks over Redis/Valkey servers running the redis-lock module.

A thin binding of the Rust crate ``redis-lock-client`` (the Redlock quorum
algorithm with fencing tokens and auto-renewal)::

    from redis_lock_client import Locker, Taken, NoQuorum, LockLost
    locker = Locker(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
                     "redis://127.0.0.1:7003"], ttl=10.0)
    with locker.lock("report", wait=5.0) as lock:
        ...  # lock.token, lock.owner, lock.validity, lock.lost

``AsyncLocker`` is the same for asyncio (``async with locker.lock(...)``).
A Locker does not survive ``fork()``: create one in each process.
"""

import atexit
import os

from ._native import __version__, Lock, Locker, LockError, LockLost, NoQuorum, Rejected, Taken, close_gate, gate_after_fork
from ._aio import AsyncLock, AsyncLocker

__all__ = [
    "Locker",
    "Lock",
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
