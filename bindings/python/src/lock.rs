//! A held lock as seen from Python: the core's `Lock`, an optional
//! renewal watchdog, and the `lost` signal.
//!
//! The watchdog follows the core's `AutoLock` (extend every ttl/3, retry
//! sooner on failure while the lock is still valid, lost when it is not)
//! but runs here, on the core's `Locker::extend`, because Python also needs
//! the lock's validity and `extend(ttl)` while it renews, which `AutoLock`
//! does not expose.

use crate::args;
use crate::errors::{self, LockLost};
use crate::runtime::{self, block_on};
use crate::spawn::{spawn_with_callback, Pending};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use redis_lock_client::{Error, Lock as CoreLock, Locker as CoreLocker};
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
        format!("lock {:?}", self.snapshot().name())
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

async fn extend(shared: Arc<Shared>, ttl: Option<Duration>) -> Result<(), Error> {
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
            Err(Error::Expired)
        }
        Err(e) => Err(e),
    }
}

async fn release(shared: Arc<Shared>) -> Result<(), Error> {
    // A validity that ran out is a loss even if the release still finds
    // the lock: note it before the release ends the validity (an explicit
    // release() inside a `with` block hid it, helper-15).
    shared.note_lost();
    shared.stop_watchdog();
    let _one_at_a_time = shared.ops.lock().await;
    if shared.released.load(Ordering::SeqCst) {
        return Ok(());
    }
    let lock = shared.snapshot().clone();
    match shared.core.unlock(&lock).await {
        Ok(()) => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        Err(Error::Expired) => {
            shared.released.store(true, Ordering::SeqCst);
            shared.lost.store(true, Ordering::SeqCst);
            Err(Error::Expired)
        }
        // Maybe still held on some nodes: a retried release() may finish it.
        Err(e) => Err(e),
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
        match extend(shared.clone(), None).await {
            Ok(()) => failing = false,
            Err(Error::Expired) => break,
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
/// left, 0.0 once it may have expired), `lost`, `released`, `auto_renew`.
///
/// `lost` becomes True when the lock can no longer be trusted: renewal
/// failed until its validity ran out, or the servers no longer hold it.
/// Then stop touching the protected resource. Dropping the last reference
/// without `release()` releases it in the background.
#[pyclass(module = "redis_lock_client", frozen)]
pub struct Lock {
    shared: Arc<Shared>,
    auto_renew: bool,
}

impl Lock {
    /// Wrap a freshly acquired lock; with `auto_renew`, start its watchdog
    /// (needs to run inside the runtime).
    pub fn start(core: CoreLocker, lock: CoreLock, auto_renew: bool) -> Lock {
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
        Lock { shared, auto_renew }
    }

    fn usable(&self) -> PyResult<()> {
        runtime::check_pid(self.shared.pid, "Lock")
    }

    fn checked_ttl(&self, ttl: Option<f64>) -> PyResult<Option<Duration>> {
        let Some(ttl) = ttl else { return Ok(None) };
        let ttl = args::positive_seconds("ttl", ttl)?;
        let node_timeout = self.shared.core.config().node_timeout();
        if ttl < Duration::from_millis(10) || ttl <= node_timeout {
            return Err(PyValueError::new_err(format!(
                "ttl must be at least 0.01 s and above the node timeout ({} s), got {} s",
                node_timeout.as_secs_f64(),
                ttl.as_secs_f64()
            )));
        }
        Ok(Some(ttl))
    }

    /// What leaving a `with` block does with the release's outcome: an
    /// error in the block wins; a lock lost while the block ran is reported
    /// as LockLost, also when the release still found it (validity runs
    /// out ~1% of the TTL before the servers' deadlines, so a release
    /// often succeeds: the block exited silently though `lost` had been
    /// True, an attack run, helper-14).
    pub fn exit_outcome(
        &self,
        py: Python<'_>,
        released: PyResult<()>,
        body_raised: bool,
    ) -> PyResult<bool> {
        match released {
            Ok(()) if body_raised || !self.shared.lost.load(Ordering::SeqCst) => Ok(false),
            Ok(()) => Err(LockLost::new_err(format!(
                "{} ran out of validity while the block ran (renewal failed or came too late): \
                 the end of the block was not protected by it",
                self.shared.context()
            ))),
            Err(_) if body_raised => Ok(false),
            Err(e) if self.lost() && !e.is_instance_of::<LockLost>(py) => {
                let lost = LockLost::new_err(format!(
                    "{} was lost while the block ran (renewal failed): the block may have \
                     overlapped another holder",
                    self.shared.context()
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
        self.shared.snapshot().name().to_string()
    }
    /// The owner value the lock was taken with (random unless given).
    #[getter]
    fn owner(&self) -> String {
        self.shared.snapshot().owner().to_string()
    }
    /// Fencing token: larger than every earlier holder's token of this name.
    #[getter]
    fn token(&self) -> u64 {
        self.shared.snapshot().token()
    }
    /// TTL in seconds that renewals and extend() reset the lock to.
    #[getter]
    fn ttl(&self) -> f64 {
        self.shared.snapshot().ttl().as_secs_f64()
    }
    /// Seconds the lock is still known to be valid (0.0 once it may have expired).
    #[getter]
    fn validity(&self) -> f64 {
        self.shared.snapshot().validity().as_secs_f64()
    }
    /// True once the lock can no longer be trusted: stop touching the resource.
    #[getter]
    fn lost(&self) -> bool {
        self.shared.note_lost()
    }
    /// True once release() succeeded (or found the lock already gone).
    #[getter]
    fn released(&self) -> bool {
        self.shared.released.load(Ordering::SeqCst)
    }
    /// Whether a background task renews the lock.
    #[getter]
    fn auto_renew(&self) -> bool {
        self.auto_renew
    }

    /// Reset the lock's TTL on a majority (to `ttl` seconds if given, which
    /// later renewals keep). Raises LockLost if it is no longer held,
    /// NoQuorum if too few servers answered.
    #[pyo3(signature = (ttl=None))]
    fn extend(&self, py: Python<'_>, ttl: Option<f64>) -> PyResult<()> {
        self.usable()?;
        let ttl = self.checked_ttl(ttl)?;
        let outcome = block_on(py, extend(self.shared.clone(), ttl))?;
        outcome.map_err(|e| errors::to_py(py, &self.shared.context(), e))
    }

    /// Stop renewing and release on every server. Safe to call from another
    /// thread, and again after success (then it does nothing). Raises
    /// LockLost if the lock had already expired or been taken over.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.usable()?;
        if self.released() {
            return Ok(());
        }
        let outcome = block_on(py, release(self.shared.clone()))?;
        outcome.map_err(|e| errors::to_py(py, &self.shared.context(), e))
    }

    /// Async extend for AsyncLock: `done(None, error_or_None)` runs on a
    /// runtime thread when finished.
    #[pyo3(signature = (done, ttl=None))]
    fn _extend_async(&self, done: Py<PyAny>, ttl: Option<f64>) -> PyResult<Pending> {
        self.usable()?;
        let ttl = self.checked_ttl(ttl)?;
        let context = self.shared.context();
        spawn_with_callback(done, context, extend(self.shared.clone(), ttl), |_, ()| {
            Ok(None)
        })
    }

    /// Async release for AsyncLock (see `_extend_async`).
    fn _release_async(&self, done: Py<PyAny>) -> PyResult<Pending> {
        self.usable()?;
        let context = self.shared.context();
        let already = self.released();
        let shared = self.shared.clone();
        let work = async move {
            if already {
                return Ok(());
            }
            release(shared).await
        };
        spawn_with_callback(done, context, work, |_, ()| Ok(None))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyType>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let released = self.release(py);
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
        let lock = self.shared.snapshot();
        format!(
            "<redis_lock_client.Lock name={:?} token={} validity={:.3}s{}{}>",
            lock.name(),
            lock.token(),
            lock.validity().as_secs_f64(),
            if self.auto_renew { " auto_renew" } else { "" },
            if self.released() { " released" } else { "" },
        )
    }
}

impl Drop for Lock {
    /// Best effort, like the core's AutoLock: stop renewing and release in
    /// the background (not in a forked child, whose runtime is not ours).
    /// Only a lock whose owner is its own: one taken with `owner=` or
    /// `reentrant=True` shares its owner with other handles or later calls,
    /// and a RELEASE from here, overtaken by such a call's WAIT, took its
    /// grant (helper-30: two holders); it expires with its TTL instead.
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.stop_watchdog();
        if shared.released.load(Ordering::SeqCst)
            || shared.pid != std::process::id()
            || !shared.snapshot().owner_is_private()
        {
            return;
        }
        if let Ok(rt) = runtime::runtime() {
            // Counted: the exit hook waits for it (a plain spawn let an
            // exit right after the drop leave the lock held, helper-29).
            rt.spawn(redis_lock_client::counted(release(shared.clone())));
        }
    }
}
