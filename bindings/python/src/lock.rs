//! A held lock as seen from Python: the `Lock` class over its current
//! hold (`hold.rs`), which it replaces when it is taken again.

use crate::acquire::Acquire;
use crate::args;
use crate::errors::{self, Failure, LockLost};
use crate::hold::{self, Shared};
use crate::runtime::{self, block_on};
use crate::spawn::{self, spawn_with_callback, Pending};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use redis_lock_client::Locker as CoreLocker;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A lock held on a majority of the servers.
///
/// Use it as a context manager (`with locker.lock("name") as lock:`), or
/// call `hold::release()`. Attributes: `name`, `owner`, `token` (fencing token,
/// larger than every earlier holder's), `ttl` and `validity` (seconds
/// left, 0.0 once it may have expired or was released), `lost`,
/// `released`, `auto_renew`.
///
/// `lost` becomes True when the lock can no longer be trusted: renewal
/// failed until its validity ran out, or the servers no longer hold it.
/// Then stop touching the protected resource. Dropping the last reference
/// without `hold::release()` releases it in the background.
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
    /// [`Acquire::run`], as a Python `Lock` that keeps the arguments (to
    /// take it again when entered while not held).
    pub async fn acquire(args: Acquire, core: CoreLocker) -> Result<Lock, Failure> {
        let shared = args.clone().run(core.clone()).await?;
        Ok(Lock::new(core, args, shared))
    }

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
                    let _ = hold::release(old.clone()).await;
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

    /// `hold::release()` without the complaint about a released lock (leaving a
    /// block in which the lock was released already).
    fn release_if_held(&self, py: Python<'_>) -> PyResult<()> {
        self.usable()?;
        let shared = self.shared();
        if shared.released.load(Ordering::SeqCst) {
            return Ok(());
        }
        let context = shared.context();
        let outcome = block_on(py, hold::release(shared))?;
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
    /// True once hold::release() succeeded (or found the lock already gone).
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
        let outcome = block_on(py, hold::extend(shared, ttl, Some("extend()")))?;
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
            return Err(self.not_held(&shared, "hold::release()"));
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
        let work = hold::extend(shared, ttl, Some("extend()"));
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
            return Err(self.not_held(&shared, "hold::release()"));
        }
        let context = shared.context();
        let work = async move {
            if already {
                return Ok(());
            }
            hold::release(shared).await
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
            hold::shown_name(lock.name()),
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
            let bounded = async { tokio::time::timeout_at(until, hold::release(shared)).await };
            let _ = rt.block_on(bounded);
            return;
        }
        // Counted: the exit hook waits for it (a plain spawn let an exit
        // right after the drop leave the lock held, 5171401).
        rt.spawn(redis_lock_client::counted(hold::release(shared)));
    }
}
