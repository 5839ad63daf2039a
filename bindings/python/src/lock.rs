//! A held lock as seen from Python: the core's `Lock`, an optional
//! renewal watchdog, and the `lost` signal.
//!
//! The watchdog follows the core's `AutoLock` (extend every ttl/3, retry
//! sooner on failure while the lock is still valid, lost when it is not)
//! but runs here, on the core's `Locker::extend`, because Python also needs
//! the lock's validity and `extend(ttl)` while it renews, which `AutoLock`
//! does not expose.

use crate::acquire::Acquire;
use crate::args;
use crate::errors::{self, Failure, LockLost};
use crate::runtime::{self, block_on};
use crate::spawn::{self, spawn_with_callback, Pending};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use redis_lock_client::{
    escape_owner, quorum_state, Error, Lock as CoreLock, Locker as CoreLocker, QuorumState,
};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::AbortHandle;

/// State shared by the Python object, its watchdog and its async calls.
pub struct Shared {
    core: CoreLocker,
    lock: Mutex<CoreLock>,
    /// Serialises extends and releases (watchdog, `extend()`, `release()`
    /// from several threads): no extend overwrites a newer validity with an
    /// older one, and a second concurrent release sees the first's outcome
    /// instead of reporting the lock as lost.
    ops: tokio::sync::Mutex<()>,
    lost: AtomicBool,
    released: AtomicBool,
    watchdog: Mutex<Option<AbortHandle>>,
    pid: u32,
}

impl Shared {
    fn snapshot(&self) -> MutexGuard<'_, CoreLock> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn context(&self) -> String {
        format!("lock {}", shown_name(self.snapshot().name()))
    }

    /// Whether the lock is lost: the flag, or (while not released) its
    /// validity ran out, which sets the flag for good.
    fn note_lost(&self) -> bool {
        if self.lost.load(Ordering::SeqCst) {
            return true;
        }
        let ran_out = !self.released.load(Ordering::SeqCst) && self.snapshot().validity().is_zero();
        if ran_out {
            self.lost.store(true, Ordering::SeqCst);
        }
        ran_out
    }

    /// Wrap a freshly acquired lock; with `auto_renew`, start its watchdog
    /// (needs to run inside the runtime).
    pub fn start(core: CoreLocker, lock: CoreLock, auto_renew: bool) -> Arc<Shared> {
        let shared = Arc::new(Shared {
            core,
            lock: Mutex::new(lock),
            ops: tokio::sync::Mutex::new(()),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            watchdog: Mutex::new(None),
            pid: std::process::id(),
        });
        if auto_renew {
            let task = tokio::spawn(renew(shared.clone()));
            *shared.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        }
        shared
    }

    /// Held as far as this process knows: not released, not lost.
    fn held(&self) -> bool {
        !self.released.load(Ordering::SeqCst) && !self.note_lost()
    }

    fn stop_watchdog(&self) {
        let handle = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            h.abort();
        }
    }
}

/// The name as messages show it: a 100 KB name printed whole drowned the
/// message (and `repr`), so long ones are cut, with their length.
pub fn shown_name(name: &str) -> String {
    const SHOWN: usize = 60;
    match name.char_indices().nth(SHOWN) {
        None => format!("{name:?}"),
        Some((cut, _)) => format!(
            "{:?}... ({} characters)",
            &name[..cut],
            name.chars().count()
        ),
    }
}

/// An owner as messages show it: printable, and cut like a name.
fn shown_owner(owner: &[u8]) -> String {
    shown_name(&escape_owner(owner))
}

/// Why a lock the core calls `Expired` (a majority said it is not this
/// owner's) is gone, from what the servers say now and whether it was
/// still valid here when the operation began: "expired", "taken by another
/// owner", or "released by someone else". One more round trip, on the
/// error path only.
async fn why_lost(shared: &Shared, was_valid: bool, what: &str) -> String {
    let (name, owner) = {
        let lock = shared.snapshot();
        (lock.name().to_string(), lock.owner().to_string())
    };
    match quorum_state(&shared.core.status(&name).await) {
        QuorumState::Held {
            owner: holder,
            nodes,
            of,
        } if holder != owner.as_bytes() => {
            let holder = shown_owner(&holder);
            if was_valid {
                format!(
                    "was taken by another owner ({holder}, on {nodes} of {of} servers) while still \
                     valid here, before {what}: its hold was ended on the servers (a force release?)"
                )
            } else {
                format!(
                    "expired before {what} (its validity ran out) and was taken by another owner \
                     since ({holder}, on {nodes} of {of} servers)"
                )
            }
        }
        QuorumState::Free { .. } | QuorumState::Held { .. } if was_valid => format!(
            "was released by someone else before {what}: the servers no longer hold it though \
             its validity had not run out (a force release, or another handle with the same \
             owner released it)"
        ),
        QuorumState::Free { .. } | QuorumState::Held { .. } => {
            format!("expired before {what}: its validity ran out and the servers no longer hold it")
        }
        QuorumState::Shared { .. } => format!(
            "is no longer held by this owner on enough servers (found before {what}: expired \
             or released; others hold the key shared)"
        ),
        _ => format!(
            "is no longer held by this owner on a majority of the servers (found before {what}; \
             expired or taken over: the servers' state could not be read)"
        ),
    }
}

/// `what`: the operation, for the message of a lost lock (None: no
/// message wanted, the watchdog's own extends).
async fn extend(
    shared: Arc<Shared>,
    ttl: Option<Duration>,
    what: Option<&'static str>,
) -> Result<(), Failure> {
    let _one_at_a_time = shared.ops.lock().await;
    let mut lock = shared.snapshot().clone();
    if let Some(ttl) = ttl {
        lock.set_ttl(ttl);
    }
    let (started, left) = (std::time::Instant::now(), lock.validity());
    match shared.core.extend(&mut lock).await {
        Ok(()) => {
            // Validity that ran out before this extension landed was a
            // moment `lost` said True: it stays True (it used to go back to
            // False, after the holder may have stopped because of it).
            if started.elapsed() >= left {
                shared.lost.store(true, Ordering::SeqCst);
            }
            *shared.snapshot() = lock;
            Ok(())
        }
        Err(Error::Expired) => {
            shared.lost.store(true, Ordering::SeqCst);
            let lost_because = match what {
                Some(what) => Some(why_lost(&shared, !left.is_zero(), what).await),
                None => None,
            };
            Err(Failure {
                err: Error::Expired,
                waited: None,
                lost_because,
            })
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn release(shared: Arc<Shared>) -> Result<(), Failure> {
    // A validity that ran out is a loss even if the release still finds
    // the lock: note it before the release ends the validity (an explicit
    // release() inside a `with` block hid it, 82fe3cf).
    shared.note_lost();
    shared.stop_watchdog();
    let _one_at_a_time = shared.ops.lock().await;
    if shared.released.load(Ordering::SeqCst) {
        return Ok(());
    }
    let lock = shared.snapshot().clone();
    let was_valid = !lock.validity().is_zero();
    match shared.core.unlock(&lock).await {
        Ok(()) => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        Err(Error::Expired) => {
            shared.released.store(true, Ordering::SeqCst);
            shared.lost.store(true, Ordering::SeqCst);
            Err(Failure {
                err: Error::Expired,
                waited: None,
                lost_because: Some(why_lost(&shared, was_valid, "release()").await),
            })
        }
        // Maybe still held on some nodes: a retried release() may finish it.
        Err(e) => Err(e.into()),
    }
}

/// The watchdog (see the module comment).
async fn renew(shared: Arc<Shared>) {
    let mut failing = false;
    loop {
        let (ttl, validity) = {
            let lock = shared.snapshot();
            (lock.ttl(), lock.validity())
        };
        let period = ttl / 3;
        let wait = if failing {
            (period / 4).max(Duration::from_millis(5))
        } else {
            period
        };
        tokio::time::sleep(wait.min(validity)).await;
        match extend(shared.clone(), None, None).await {
            Ok(()) => failing = false,
            Err(Failure {
                err: Error::Expired,
                ..
            }) => break,
            Err(_) if shared.snapshot().validity().is_zero() => break,
            Err(_) => failing = true,
        }
    }
    shared.lost.store(true, Ordering::SeqCst);
}

/// A lock held on a majority of the servers.
///
/// Use it as a context manager (`with locker.lock("name") as lock:`), or
/// call `release()`. Attributes: `name`, `owner`, `token` (fencing token,
/// larger than every earlier holder's), `ttl` and `validity` (seconds
/// left, 0.0 once it may have expired or was released), `lost`,
/// `released`, `auto_renew`.
///
/// `lost` becomes True when the lock can no longer be trusted: renewal
/// failed until its validity ran out, or the servers no longer hold it.
/// Then stop touching the protected resource. Dropping the last reference
/// without `release()` releases it in the background.
///
/// Entering a lock that is not held (released, or lost) takes it again,
/// with the arguments of the `lock()` call that made it, and waits as that
/// call did: `with lock:` twice runs both blocks under the lock (a new
/// token each time). A lock already inside a `with` block cannot be
/// entered again (RuntimeError): a Lock is not reentrant.
#[pyclass(module = "redis_lock_client", frozen)]
pub struct Lock {
    core: CoreLocker,
    /// The arguments it was taken with, to take it again.
    args: Acquire,
    handle: Arc<Handle>,
}

/// What changes when a Lock is taken again, shared with the tasks that do it.
struct Handle {
    /// The current hold; replaced when the lock is taken again.
    state: Mutex<Arc<Shared>>,
    /// Inside a `with` / `async with` block.
    entered: AtomicBool,
}

impl Handle {
    fn shared(&self) -> Arc<Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Clears a handle's "inside a block" mark when dropped armed: taking the
/// lock again failed, or was dropped midway (an asyncio task cancelled
/// while it waited, 2026-11-28: the lock then refused every later `async
/// with` as "already inside a `with` block").
struct NotEntered(Option<Arc<Handle>>);

impl NotEntered {
    /// The block was entered: leave the mark.
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for NotEntered {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.entered.store(false, Ordering::SeqCst);
        }
    }
}

impl Lock {
    pub fn new(core: CoreLocker, args: Acquire, shared: Arc<Shared>) -> Lock {
        Lock {
            core,
            args,
            handle: Arc::new(Handle {
                state: Mutex::new(shared),
                entered: AtomicBool::new(false),
            }),
        }
    }

    fn shared(&self) -> Arc<Shared> {
        self.handle.shared()
    }

    fn usable(&self) -> PyResult<()> {
        runtime::check_pid(self.shared().pid, "Lock")
    }

    fn checked_ttl(&self, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
        let Some(ttl) = ttl.filter(|t| !t.is_none()) else {
            return Ok(None);
        };
        let ttl = args::positive_seconds("ttl", ttl)?;
        let node_timeout = self.core.config().node_timeout();
        if ttl < Duration::from_millis(10) || ttl <= node_timeout {
            return Err(PyValueError::new_err(format!(
                "ttl must be at least 0.01 s and above the node timeout ({} s), got {} s",
                node_timeout.as_secs_f64(),
                ttl.as_secs_f64()
            )));
        }
        Ok(Some(ttl))
    }

    /// RuntimeError for `what` on a released lock.
    fn not_held(&self, shared: &Shared, what: &str) -> PyErr {
        PyRuntimeError::new_err(format!(
            "{} was released: {what} needs a held lock (enter it again, `with lock:`, to take \
             it anew)",
            shared.context()
        ))
    }

    /// Mark the lock as inside a `with` block, or say it already is.
    fn enter_block(&self) -> PyResult<()> {
        if self.handle.entered.swap(true, Ordering::SeqCst) {
            return Err(PyRuntimeError::new_err(format!(
                "{} is already inside a `with` block: a Lock is not reentrant (take another \
                 one, or pass reentrant=True with its owner)",
                self.shared().context()
            )));
        }
        Ok(())
    }

    /// Take the lock again with its original arguments (it is not held):
    /// first let go of the old hold if only this handle's owner has it,
    /// then acquire and make the new hold this Lock's. On failure the block
    /// is not entered.
    fn take_again(&self) -> impl Future<Output = Result<(), Failure>> + Send + 'static {
        let (core, args, handle) = (self.core.clone(), self.args.clone(), self.handle.clone());
        let old = handle.shared();
        // Made before the future is first polled: one aborted before it
        // starts has not entered the block either.
        let mut not_entered = NotEntered(Some(handle.clone()));
        async move {
            let taken = async {
                old.stop_watchdog();
                let private = old.snapshot().owner_is_private();
                if private && !old.released.load(Ordering::SeqCst) {
                    let _ = release(old.clone()).await;
                }
                args.run(core).await
            };
            match taken.await {
                Ok(new) => {
                    *handle.state.lock().unwrap_or_else(|p| p.into_inner()) = new;
                    not_entered.disarm();
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
    }

    /// `release()` without the complaint about a released lock (leaving a
    /// block in which the lock was released already).
    fn release_if_held(&self, py: Python<'_>) -> PyResult<()> {
        self.usable()?;
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return Ok(());
        }
        let context = shared.context();
        let outcome = block_on(py, release(shared))?;
        outcome.map_err(|e| errors::to_py(py, &context, e))
    }

    /// What leaving a `with` block does with the release's outcome: an
    /// error in the block wins; a lock lost while the block ran is reported
    /// as LockLost, also when the release still found it (validity runs
    /// out ~1% of the TTL before the servers' deadlines, so a release
    /// often succeeds: the block exited silently though `lost` had been
    /// True, an attack run, 5d8fbc4).
    pub fn exit_outcome(
        &self,
        py: Python<'_>,
        released: PyResult<()>,
        body_raised: bool,
    ) -> PyResult<bool> {
        self.handle.entered.store(false, Ordering::SeqCst);
        let shared = self.shared();
        match released {
            Ok(()) if body_raised || !shared.lost.load(Ordering::SeqCst) => Ok(false),
            Ok(()) => Err(LockLost::new_err(format!(
                "{} ran out of validity while the block ran (renewal failed or came too late): \
                 the end of the block was not protected by it",
                shared.context()
            ))),
            Err(_) if body_raised => Ok(false),
            Err(e) if shared.note_lost() && !e.is_instance_of::<LockLost>(py) => {
                let lost = LockLost::new_err(format!(
                    "{} was lost while the block ran (renewal failed): the block may have \
                     overlapped another holder",
                    shared.context()
                ));
                lost.set_cause(py, Some(e));
                Err(lost)
            }
            Err(e) => Err(e),
        }
    }
}

#[pymethods]
impl Lock {
    /// The lock's name (the key on every server).
    #[getter]
    fn name(&self) -> String {
        self.shared().snapshot().name().to_string()
    }
    /// The owner value the lock was taken with (random unless given).
    #[getter]
    fn owner(&self) -> String {
        self.shared().snapshot().owner().to_string()
    }
    /// Fencing token: larger than every earlier holder's token of this name.
    #[getter]
    fn token(&self) -> u64 {
        self.shared().snapshot().token()
    }
    /// Taken shared (`shared=True` or `limit=`).
    #[getter(shared)]
    fn is_shared(&self) -> bool {
        self.shared().snapshot().is_shared()
    }
    /// The limit it was taken under (None: no limit).
    #[getter]
    fn limit(&self) -> Option<u32> {
        self.shared().snapshot().limit()
    }
    /// TTL in seconds that renewals and extend() reset the lock to.
    #[getter]
    fn ttl(&self) -> f64 {
        self.shared().snapshot().ttl().as_secs_f64()
    }
    /// Seconds the lock is still known to be valid (0.0 once it may have
    /// expired, and once released).
    #[getter]
    fn validity(&self) -> f64 {
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return 0.0;
        }
        let left = shared.snapshot().validity();
        left.as_secs_f64()
    }
    /// True once the lock can no longer be trusted: stop touching the resource.
    #[getter]
    fn lost(&self) -> bool {
        self.shared().note_lost()
    }
    /// True once release() succeeded (or found the lock already gone).
    #[getter]
    fn released(&self) -> bool {
        self.shared().released.load(Ordering::SeqCst)
    }
    /// Whether a background task renews the lock.
    #[getter]
    fn auto_renew(&self) -> bool {
        self.args.auto_renew
    }

    /// Reset the lock's TTL on a majority (to `ttl` seconds if given, which
    /// later renewals keep). Raises LockLost if it is no longer held (the
    /// message says whether it expired, was taken by another owner or was
    /// released by someone else), NoQuorum if too few servers answered,
    /// RuntimeError if it was released.
    #[pyo3(signature = (ttl=None))]
    fn extend(&self, py: Python<'_>, ttl: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        self.usable()?;
        let ttl = self.checked_ttl(ttl.as_ref())?;
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return Err(self.not_held(&shared, "extend()"));
        }
        let context = shared.context();
        let outcome = block_on(py, extend(shared, ttl, Some("extend()")))?;
        outcome.map_err(|e| errors::to_py(py, &context, e))
    }

    /// Stop renewing and release on every server. Safe to call from several
    /// threads at once (each sees the one release's outcome). Raises
    /// LockLost if the lock had already expired or been taken over,
    /// RuntimeError if it was released before the call.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.usable()?;
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return Err(self.not_held(&shared, "release()"));
        }
        self.release_if_held(py)
    }

    /// Async extend for AsyncLock: `done(None, error_or_None)` runs on a
    /// runtime thread when finished.
    #[pyo3(signature = (done, ttl=None))]
    fn _extend_async(&self, done: Py<PyAny>, ttl: Option<Bound<'_, PyAny>>) -> PyResult<Pending> {
        self.usable()?;
        let ttl = self.checked_ttl(ttl.as_ref())?;
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return Err(self.not_held(&shared, "extend()"));
        }
        let context = shared.context();
        let work = extend(shared, ttl, Some("extend()"));
        spawn_with_callback(done, context, work, |_, ()| Ok(None))
    }

    /// Async release for AsyncLock (see `_extend_async`); `if_held`: a
    /// released lock is not an error (leaving an `async with` block).
    #[pyo3(signature = (done, if_held=false))]
    fn _release_async(&self, done: Py<PyAny>, if_held: bool) -> PyResult<Pending> {
        self.usable()?;
        let shared = self.shared();
        let already = shared.released.load(Ordering::SeqCst);
        if already && !if_held {
            return Err(self.not_held(&shared, "release()"));
        }
        let context = shared.context();
        let work = async move {
            if already {
                return Ok(());
            }
            release(shared).await
        };
        spawn_with_callback(done, context, work, |_, ()| Ok(None))
    }

    /// Async entering for AsyncLock (see `__enter__`): `done(None, None)`
    /// once held, `done(None, error)` if taking it again failed.
    fn _enter_async(&self, done: Py<PyAny>) -> PyResult<Pending> {
        self.usable()?;
        self.enter_block()?;
        let context = self.shared().context();
        let again = (!self.shared().held()).then(|| self.take_again());
        let work = async move {
            match again {
                Some(again) => again.await,
                None => Ok(()),
            }
        };
        spawn_with_callback(done, context, work, |_, ()| Ok(None))
    }

    /// Enter a `with` block: the lock as it is if held, else taken again
    /// with the arguments it was first taken with (see the class doc).
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        let this = slf.get();
        this.usable()?;
        this.enter_block()?;
        if !this.shared().held() {
            let context = this.shared().context();
            let again = block_on(py, this.take_again());
            let again =
                again.inspect_err(|_| this.handle.entered.store(false, Ordering::SeqCst))?;
            again.map_err(|e| errors::to_py(py, &context, e))?;
        }
        Ok(slf)
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let released = self.release_if_held(py);
        self.exit_outcome(py, released, exc_type.is_some())
    }

    /// Used by AsyncLock.__aexit__: the same policy as __exit__.
    fn _exit_outcome(
        &self,
        py: Python<'_>,
        error: Option<Bound<'_, PyAny>>,
        body_raised: bool,
    ) -> PyResult<bool> {
        let released = error.map_or(Ok(()), |e| Err(PyErr::from_value(e)));
        self.exit_outcome(py, released, body_raised)
    }

    fn __repr__(&self) -> String {
        let shared = self.shared();
        let lock = shared.snapshot();
        let released = shared.released.load(Ordering::SeqCst);
        let validity = if released {
            0.0
        } else {
            lock.validity().as_secs_f64()
        };
        format!(
            "<redis_lock_client.Lock name={} token={} validity={:.3}s{}{}>",
            shown_name(lock.name()),
            lock.token(),
            validity,
            if self.args.auto_renew {
                " auto_renew"
            } else {
                ""
            },
            if released { " released" } else { "" },
        )
    }
}

impl Drop for Lock {
    /// Best effort, like the core's AutoLock: stop renewing and release in
    /// the background (not in a forked child, whose runtime is not ours).
    /// Only a lock whose owner is its own: one taken with `owner=` or
    /// `reentrant=True` shares its owner with other handles or later calls,
    /// and a RELEASE from here, overtaken by such a call's WAIT, took its
    /// grant (b0d086f: two holders); it expires with its TTL instead.
    fn drop(&mut self) {
        let shared = self.shared();
        shared.stop_watchdog();
        if shared.released.load(Ordering::SeqCst)
            || shared.pid != std::process::id()
            || !shared.snapshot().owner_is_private()
        {
            return;
        }
        let Ok(rt) = runtime::runtime() else { return };
        // At interpreter exit (a lock in a module global is destroyed after
        // the exit hook) nothing waits for a background release: the
        // process could end before it was sent. Wait for it here, bounded,
        // so that a normal exit releases such a lock. Not on a runtime
        // thread, where blocking on the runtime is not allowed.
        if spawn::exiting() && tokio::runtime::Handle::try_current().is_err() {
            // The timer is made inside block_on: it needs the runtime's context.
            let until = tokio::time::Instant::from_std(spawn::exit_release_deadline());
            let bounded = async { tokio::time::timeout_at(until, release(shared)).await };
            let _ = rt.block_on(bounded);
            return;
        }
        // Counted: the exit hook waits for it (a plain spawn let an exit
        // right after the drop leave the lock held, 5171401).
        rt.spawn(redis_lock_client::counted(release(shared)));
    }
}
