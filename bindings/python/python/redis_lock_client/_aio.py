"""asyncio API: the same shape as Locker, on the Rust runtime.

The native calls run on the extension's tokio runtime and report back
through a callback on a runtime thread; ``_run`` hands that to the event
loop with ``call_soon_threadsafe``, so the loop never blocks on the network.
Cancelling the awaiting task cancels the Rust operation.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import warnings
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, TypeVar, Union

from ._native import Acquisition, Lock, Locker, LockError, LockStatus

F = TypeVar("F", bound=Callable[..., Any])


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
    ``await release()``; ``async with`` releases on exit.

    Entering a lock that is not held (released, or lost) takes it again
    with its original arguments, as Lock does; a lock already inside an
    ``async with`` block cannot be entered again (RuntimeError)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._lock.name

    @property
    def owner(self) -> str:
        """The owner value it was taken with."""
        return self._lock.owner

    @property
    def token(self) -> int:
        """Fencing token."""
        return self._lock.token

    @property
    def shared(self) -> bool:
        """Taken shared (``shared=True`` or ``limit=``)."""
        return self._lock.shared

    @property
    def limit(self) -> Optional[int]:
        """The limit it was taken under (None: no limit)."""
        return self._lock.limit

    @property
    def ttl(self) -> float:
        """TTL in seconds that renewals reset it to."""
        return self._lock.ttl

    @property
    def validity(self) -> float:
        """Seconds still known valid (0.0 once it may have expired, and once released)."""
        return self._lock.validity

    @property
    def lost(self) -> bool:
        """True once the lock can no longer be trusted."""
        return self._lock.lost

    @property
    def released(self) -> bool:
        """True once released."""
        return self._lock.released

    @property
    def auto_renew(self) -> bool:
        """Renewed in the background."""
        return self._lock.auto_renew

    async def extend(self, ttl: Optional[float] = None) -> None:
        """Reset the TTL on a majority (to ``ttl`` seconds if given).
        RuntimeError once released."""
        await _run(lambda done: self._lock._extend_async(done, ttl))

    async def release(self) -> None:
        """Stop renewing and release on every server. RuntimeError if it
        was released already."""
        await _run(self._lock._release_async)

    async def __aenter__(self) -> "AsyncLock":
        await _run(self._lock._enter_async)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            await _run(lambda done: self._lock._release_async(done, True))
        except LockError as error:
            return self._lock._exit_outcome(error, exc_type is not None)
        return self._lock._exit_outcome(None, exc_type is not None)

    def __repr__(self) -> str:
        return repr(self._lock).replace("redis_lock_client.Lock", "redis_lock_client.AsyncLock")


class _Acquisition:
    """What ``AsyncLocker.lock()`` returns: await it for an AsyncLock, or
    use it with ``async with`` (released on exit). Its arguments were
    checked by the call; one never awaited nor entered warns
    (RuntimeWarning), like a coroutine never awaited."""

    __slots__ = ("_acquisition", "_entered", "_used")

    def __init__(self, acquisition: Acquisition) -> None:
        self._acquisition = acquisition
        # The locks of the blocks inside it, by task: one acquisition made
        # once and entered by several tasks (as an asyncio.Lock is) takes a
        # lock per block, and each block must leave its own. With one slot,
        # a task whose lock expired inside its block released the next
        # task's lock on leaving, and said nothing of its own loss
        # (2026-11-28).
        self._entered: Dict[Any, List[AsyncLock]] = {}
        self._used = False

    async def _acquire(self) -> AsyncLock:
        self._used = True
        return AsyncLock(await _run(self._acquisition._start))

    def __await__(self) -> Generator[Any, None, AsyncLock]:
        self._used = True
        return self._acquire().__await__()

    async def __aenter__(self) -> AsyncLock:
        self._used = True
        lock = await self._acquire()
        entered = await lock.__aenter__()
        self._entered.setdefault(asyncio.current_task(), []).append(lock)
        return entered

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        task = asyncio.current_task()
        if task not in self._entered and len(self._entered) == 1:
            # Left from another task than the one that entered (an
            # AsyncExitStack closed in a task of its own): the one block in.
            task = next(iter(self._entered))
        if task not in self._entered:
            raise RuntimeError(
                f"AsyncLocker.lock({self._acquisition.name!r:.80}) left from a task that did not "
                "enter it, while several tasks are inside it: which block's lock to release is unknown"
            )
        mine = self._entered[task]
        lock = mine.pop()
        if not mine:
            del self._entered[task]
        return await lock.__aexit__(exc_type, exc, tb)

    def __del__(self) -> None:
        if not getattr(self, "_used", True):
            warnings.warn(
                f"AsyncLocker.lock({self._acquisition.name!r:.80}) was never awaited "
                "(nor used with `async with`): the lock was not taken",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )

    def __repr__(self) -> str:
        return repr(self._acquisition)


def _synchronized(locker: Locker, name: Union[str, bytes], wait: Optional[float], options: Dict[str, Any]) -> Callable[[F], F]:
    """The decorator of Locker.synchronized / AsyncLocker.synchronized."""
    locker._acquisition(name, wait, **options)  # bad arguments raise here, at decoration

    def decorate(fn: F) -> F:
        # A generator function returns at once, before its body ran: held
        # around that call, the lock protected none of it (2026-11-28). It
        # is held from the first item until the generator ends or is closed.
        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def locked_generator(*args: Any, **kwargs: Any) -> Any:
                with locker.lock(name, wait, **options):
                    return (yield from fn(*args, **kwargs))

            return locked_generator  # type: ignore[return-value]

        if inspect.isasyncgenfunction(fn):

            @functools.wraps(fn)
            async def locked_async_generator(*args: Any, **kwargs: Any) -> Any:
                async with _Acquisition(locker._acquisition(name, wait, **options)):
                    # What is sent or thrown in is passed on (not just the
                    # items: `async for` would drop asend values and throws).
                    inner = fn(*args, **kwargs)
                    try:
                        item = await inner.__anext__()
                        while True:
                            try:
                                sent = yield item
                            except GeneratorExit:
                                raise
                            except BaseException as error:  # thrown in: the inner one decides
                                item = await inner.athrow(error)
                            else:
                                item = await inner.asend(sent)
                    except StopAsyncIteration:
                        return
                    finally:
                        await inner.aclose()

            return locked_async_generator  # type: ignore[return-value]

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def locked_async(*args: Any, **kwargs: Any) -> Any:
                async with _Acquisition(locker._acquisition(name, wait, **options)):
                    return await fn(*args, **kwargs)

            return locked_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with locker.lock(name, wait, **options):
                return fn(*args, **kwargs)

        return locked  # type: ignore[return-value]

    return decorate


class AsyncLocker:
    """AsyncLocker(urls, ttl=10.0, **settings) -- Locker for asyncio.

    Same arguments as Locker. ``lock()`` never blocks the event loop::

        async with locker.lock("report", wait=5.0) as lock:
            ...
        lock = await locker.lock("report", auto_renew=False)
        await lock.extend(30.0); await lock.release()
    """

    __slots__ = ("_locker",)

    def __init__(self, urls: Union[str, Sequence[str]], ttl: float = 10.0, **settings: Any) -> None:
        self._locker = Locker(urls, ttl, **settings)

    def lock(
        self,
        name: Union[str, bytes],
        wait: Optional[float] = 0.0,
        *,
        ttl: Optional[float] = None,
        auto_renew: bool = True,
        reentrant: bool = False,
        owner: Optional[str] = None,
        shared: bool = False,
        limit: Optional[int] = None,
    ) -> _Acquisition:
        """Acquire ``name`` (see Locker.lock); await the result or use it
        with ``async with``. Bad arguments raise ValueError/TypeError here,
        at the call."""
        return _Acquisition(
            self._locker._acquisition(
                name,
                wait,
                ttl=ttl,
                auto_renew=auto_renew,
                reentrant=reentrant,
                owner=owner,
                shared=shared,
                limit=limit,
            )
        )

    async def status(self, name: Union[str, bytes]) -> LockStatus:
        """Who holds ``name``, as a majority of the servers says (see Locker.status)."""
        status: LockStatus = await _run(lambda done: self._locker._status_async(done, name))
        return status

    def synchronized(self, name: Union[str, bytes], wait: Optional[float] = 0.0, **options: Any) -> Callable[[F], F]:
        """Decorator: each call of the function runs holding ``name`` (see
        Locker.synchronized)."""
        return _synchronized(self._locker, name, wait, options)

    @property
    def urls(self) -> List[str]:
        return self._locker.urls

    @property
    def ttl(self) -> float:
        return self._locker.ttl

    def __repr__(self) -> str:
        return repr(self._locker).replace("redis_lock_client.Locker", "redis_lock_client.AsyncLocker")
