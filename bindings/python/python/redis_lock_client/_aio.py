"""asyncio API: the same shape as Locker, on the Rust runtime.

The native calls run on the extension's tokio runtime and report back
through a callback on a runtime thread; ``_run`` hands that to the event
loop with ``call_soon_threadsafe``, so the loop never blocks on the network.
Cancelling the awaiting task cancels the Rust operation.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, List, Optional, Sequence

from ._native import Lock, Locker, LockError, LockLost


def _settle(future: "asyncio.Future[Any]", result: Any, error: Optional[BaseException]) -> None:
    if future.done():  # cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def _run(start: Callable[[Callable[[Any, Any], None]], Any]) -> Any:
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(result: Any, error: Optional[BaseException]) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the loop was closed: nobody is waiting
            pass

    pending = start(done)
    future.add_done_callback(lambda f: f.cancelled() and pending.cancel())
    return await future


class AsyncLock:
    """A held lock (asyncio). Same attributes as Lock; ``await extend()``,
    ``await release()``; ``async with`` releases on exit."""

    __slots__ = ("_lock",)

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    name = property(lambda self: self._lock.name, doc="The lock's name.")
    owner = property(lambda self: self._lock.owner, doc="The owner value it was taken with.")
    token = property(lambda self: self._lock.token, doc="Fencing token (int).")
    ttl = property(lambda self: self._lock.ttl, doc="TTL in seconds that renewals reset it to.")
    validity = property(lambda self: self._lock.validity, doc="Seconds still known valid.")
    lost = property(lambda self: self._lock.lost, doc="True once the lock can no longer be trusted.")
    released = property(lambda self: self._lock.released, doc="True once released.")
    auto_renew = property(lambda self: self._lock.auto_renew, doc="Renewed in the background.")

    async def extend(self, ttl: Optional[float] = None) -> None:
        """Reset the TTL on a majority (to ``ttl`` seconds if given)."""
        await _run(lambda done: self._lock._extend_async(done, ttl))

    async def release(self) -> None:
        """Stop renewing and release on every server."""
        await _run(self._lock._release_async)

    async def __aenter__(self) -> "AsyncLock":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            await self.release()
        except LockError as error:
            return self._lock._exit_outcome(error, exc_type is not None)
        return self._lock._exit_outcome(None, exc_type is not None)

    def __repr__(self) -> str:
        return repr(self._lock).replace("redis_lock_client.Lock", "redis_lock_client.AsyncLock")


class _Acquisition:
    """What ``AsyncLocker.lock()`` returns: await it for an AsyncLock, or
    use it with ``async with`` (released on exit)."""

    __slots__ = ("_start", "_lock")

    def __init__(self, start: Callable[[Callable[[Any, Any], None]], Any]) -> None:
        self._start = start
        self._lock: Optional[AsyncLock] = None

    async def _acquire(self) -> AsyncLock:
        return AsyncLock(await _run(self._start))

    def __await__(self) -> Generator[Any, None, AsyncLock]:
        return self._acquire().__await__()

    async def __aenter__(self) -> AsyncLock:
        self._lock = await self._acquire()
        return self._lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        assert self._lock is not None
        return await self._lock.__aexit__(exc_type, exc, tb)


class AsyncLocker:
    """AsyncLocker(urls, ttl=10.0, **settings) -- Locker for asyncio.

    Same arguments as Locker. ``lock()`` never blocks the event loop::

        async with locker.lock("report", wait=5.0) as lock:
            ...
        lock = await locker.lock("report", auto_renew=False)
        await lock.extend(30.0); await lock.release()
    """

    __slots__ = ("_locker",)

    def __init__(self, urls: Sequence[str], ttl: float = 10.0, **settings: Any) -> None:
        self._locker = Locker(urls, ttl, **settings)

    def lock(
        self,
        name: str,
        wait: float = 0.0,
        *,
        ttl: Optional[float] = None,
        auto_renew: bool = True,
        reentrant: bool = False,
        owner: Optional[str] = None,
    ) -> _Acquisition:
        """Acquire ``name`` (see Locker.lock); await the result or use it
        with ``async with``. Bad arguments raise ValueError/TypeError there."""
        return _Acquisition(
            lambda done: self._locker._lock_async(
                done, name, wait, ttl=ttl, auto_renew=auto_renew, reentrant=reentrant, owner=owner
            )
        )

    @property
    def urls(self) -> List[str]:
        return self._locker.urls

    @property
    def ttl(self) -> float:
        return self._locker.ttl

    def __repr__(self) -> str:
        return repr(self._locker).replace("redis_lock_client.Locker", "redis_lock_client.AsyncLocker")
