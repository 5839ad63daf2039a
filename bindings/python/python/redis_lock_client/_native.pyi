"""Type stubs of the PyO3 extension (see bindings/python/src/)."""

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

__version__: str
"""The package version: the same as the module's (MODULE LIST), the crate's and the CLI's."""

class LockError(Exception):
    """Base class of redis-lock-client errors."""

    failures: List[Tuple[str, str]]
    """(node, cause) for each server that failed; empty when unknown."""

class Taken(LockError):
    """Another owner holds the lock and it did not come free within `wait`."""

    waited: Optional[float]
    """Seconds the call waited."""

class NoQuorum(LockError):
    """Not enough servers answered: an outage, not contention."""

    granted: int
    needed: int

class LockLost(LockError):
    """The lock expired, was taken by another owner or was released by
    someone else (the message says which): stop touching the resource."""

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
    def shared(self) -> bool: ...
    @property
    def limit(self) -> Optional[int]: ...
    @property
    def ttl(self) -> float: ...
    @property
    def validity(self) -> float:
        """Seconds the lock is still known to be valid (0.0 once it may have expired, and once released)."""
    @property
    def lost(self) -> bool:
        """True once the lock can no longer be trusted."""
    @property
    def released(self) -> bool: ...
    @property
    def auto_renew(self) -> bool: ...
    def extend(self, ttl: Optional[float] = None) -> None:
        """RuntimeError once released; LockLost if no longer held."""
    def release(self) -> None:
        """RuntimeError if released before; LockLost if no longer held."""
    def __enter__(self) -> "Lock":
        """Takes the lock again (original arguments) if it is not held;
        RuntimeError inside a `with` block of this lock already."""
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...
    def _extend_async(self, done: Callable[[Any, Any], None], ttl: Optional[float] = None) -> Pending: ...
    def _release_async(self, done: Callable[[Any, Any], None], if_held: bool = False) -> Pending: ...
    def _enter_async(self, done: Callable[[Any, Any], None]) -> Pending: ...
    def _exit_outcome(self, error: Optional[BaseException], body_raised: bool) -> bool: ...

class Acquisition:
    """A checked acquisition, run by `_start` (AsyncLocker.lock)."""

    @property
    def name(self) -> str: ...
    def _start(self, done: Callable[[Any, Any], None]) -> Pending: ...

class LockStatus:
    """What a majority of the servers says about a lock now."""

    name: str
    state: str
    """"held", "free", "shared" (held shared: see `holders`), "unknown" (no owner has a majority) or "unreachable"."""
    held: bool
    owner: Optional[str]
    token: Optional[int]
    validity: Optional[float]
    """Seconds the servers keep it on a majority if not renewed (None unless held)."""
    servers: int
    """Servers where it is held by `owner` (or free, when "free"; that answered, when "unreachable")."""
    of: int
    failures: List[Tuple[str, str]]
    holders: List[Tuple[str, int]]
    """A shared key's holders: (owner, servers where it holds), in the order granted."""
    limit: Optional[int]
    """A shared key's limit (None: no limit, or not shared)."""

class Locker:
    """Quorum (Redlock) client over servers running the redis-lock module."""

    def __init__(
        self,
        urls: Union[str, Sequence[str]],
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
        name: Union[str, bytes],
        wait: Optional[float] = 0.0,
        *,
        ttl: Optional[float] = None,
        auto_renew: bool = True,
        reentrant: bool = False,
        owner: Optional[str] = None,
        shared: bool = False,
        limit: Optional[int] = None,
    ) -> Lock: ...
    def _acquisition(
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
    ) -> Acquisition: ...
    def status(self, name: Union[str, bytes]) -> LockStatus: ...
    def _status_async(self, done: Callable[[Any, Any], None], name: Union[str, bytes]) -> Pending: ...
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
