"""Type stubs of the PyO3 extension (see bindings/python/src/)."""

from typing import Any, Callable, List, Optional, Sequence, Tuple

__version__: str
"""The package version: the same as the module's (MODULE LIST), the crate's and the CLI's."""

class LockError(Exception):
    """Base class of redis-lock-client errors."""

    failures: List[Tuple[str, str]]
    """(node, cause) for each server that failed; empty when unknown."""

class Taken(LockError):
    """Another owner holds the lock and it did not come free within `wait`."""

class NoQuorum(LockError):
    """Not enough servers answered: an outage, not contention."""

    granted: int
    needed: int

class LockLost(LockError):
    """The lock expired or was taken over: stop touching the resource."""

class Rejected(LockError):
    """A server refused the request; retrying cannot help."""

    node: str
    message: str

class Pending:
    def cancel(self) -> None: ...

class Lock:
    """A lock held on a majority of the servers; a context manager."""

    @property
    def name(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def ttl(self) -> float: ...
    @property
    def validity(self) -> float:
        """Seconds the lock is still known to be valid (0.0 once it may have expired)."""
    @property
    def lost(self) -> bool:
        """True once the lock can no longer be trusted."""
    @property
    def released(self) -> bool: ...
    @property
    def auto_renew(self) -> bool: ...
    def extend(self, ttl: Optional[float] = None) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Lock": ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...
    def _extend_async(self, done: Callable[[Any, Any], None], ttl: Optional[float] = None) -> Pending: ...
    def _release_async(self, done: Callable[[Any, Any], None]) -> Pending: ...
    def _exit_outcome(self, error: Optional[BaseException], body_raised: bool) -> bool: ...

class Locker:
    """Quorum (Redlock) client over servers running the redis-lock module."""

    def __init__(
        self,
        urls: Sequence[str],
        ttl: float = 10.0,
        *,
        node_timeout: Optional[float] = None,
        retry_count: Optional[int] = None,
        retry_delay: Tuple[float, float] = (0.05, 0.25),
        drift_factor: float = 0.01,
        fencing: bool = True,
    ) -> None: ...
    def lock(
        self,
        name: str,
        wait: float = 0.0,
        *,
        ttl: Optional[float] = None,
        auto_renew: bool = True,
        reentrant: bool = False,
        owner: Optional[str] = None,
    ) -> Lock: ...
    def _lock_async(
        self,
        done: Callable[[Any, Any], None],
        name: str,
        wait: float = 0.0,
        *,
        ttl: Optional[float] = None,
        auto_renew: bool = True,
        reentrant: bool = False,
        owner: Optional[str] = None,
    ) -> Pending: ...
    @property
    def urls(self) -> List[str]: ...
    @property
    def ttl(self) -> float: ...
    @property
    def node_timeout(self) -> float: ...

def close_gate() -> None:
    """At interpreter exit (registered with atexit): wait until no runtime
    thread is calling into Python, and stop further callbacks."""

def gate_after_fork() -> None:
    """In a forked child (registered with os.register_at_fork): forget the
    parent's callbacks in progress."""
