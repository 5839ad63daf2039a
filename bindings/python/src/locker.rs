//! `Locker`: the core's quorum Locker for Python, blocking calls with the
//! GIL released (the asyncio API in `_aio.py` wraps `_lock_async`).

use crate::args;
use crate::errors;
use crate::lock::Lock;
use crate::runtime::{self, block_on};
use crate::spawn::{spawn_with_callback, Pending};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use redis_lock_client::{Builder, Error, Lock as CoreLock, LockOptions, Locker as CoreLocker};
use std::future::Future;

/// Quorum (Redlock) client over independent Redis/Valkey servers running
/// the redis-lock module. A lock is held when a majority of `urls` granted
/// it. Times are in seconds (floats).
///
/// - `ttl`: default lock TTL (per lock: `lock(..., ttl=)`).
/// - `node_timeout`: deadline of one request to one server (default
///   ttl/20, clamped to 0.005-0.5 s).
/// - `retry_count`: cap on acquisition rounds per `lock()` call.
/// - `retry_delay`: (min, max) of the random pause between rounds.
/// - `drift_factor`: clock drift allowance, a fraction of the TTL.
/// - `fencing`: raise tokens on lagging servers so tokens always increase.
///
/// Thread-safe; share one Locker. Not usable in a forked child: create a
/// new one there (using it raises RuntimeError).
///
/// >>> locker = Locker(["redis://127.0.0.1:7001"], ttl=10.0)
/// >>> with locker.lock("report", wait=5.0) as lock:
/// ...     print(lock.token, lock.validity, lock.lost)
#[pyclass(module = "redis_lock_client", frozen)]
pub struct Locker {
    core: CoreLocker,
    pid: u32,
}

/// The arguments of one `lock()` call, checked.
struct Acquire {
    name: String,
    opts: LockOptions,
    auto_renew: bool,
}

impl Locker {
    #[allow(clippy::too_many_arguments)]
    fn acquire_args(
        &self,
        name: String,
        wait: f64,
        ttl: Option<f64>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
    ) -> PyResult<Acquire> {
        runtime::check_pid(self.pid, "Locker")?;
        args::lock_name(&name)?;
        let mut opts = LockOptions::new()
            .wait(args::seconds("wait", wait)?)
            .reentrant(reentrant);
        if let Some(ttl) = ttl {
            opts = opts.ttl(args::positive_seconds("ttl", ttl)?);
        }
        if let Some(owner) = owner {
            opts = opts.owner(owner);
        }
        Ok(Acquire {
            name,
            opts,
            auto_renew,
        })
    }

    /// The acquisition, wrapped into a `Lock` on the runtime (where the
    /// watchdog must be spawned).
    fn acquire(&self, a: Acquire) -> impl Future<Output = Result<Lock, Error>> + Send + 'static {
        let core = self.core.clone();
        async move {
            let lock: CoreLock = core.acquire(&a.name, &a.opts).await?;
            Ok(Lock::start(core, lock, a.auto_renew))
        }
    }
}

#[pymethods]
impl Locker {
    #[new]
    #[pyo3(
        text_signature = "(urls, ttl=10.0, *, node_timeout=None, retry_count=None, retry_delay=(0.05, 0.25), drift_factor=0.01, fencing=True)"
    )]
    #[pyo3(signature = (urls, ttl=10.0, *, node_timeout=None, retry_count=None, retry_delay=(0.05, 0.25), drift_factor=0.01, fencing=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        urls: Vec<String>,
        ttl: f64,
        node_timeout: Option<f64>,
        retry_count: Option<i64>,
        retry_delay: (f64, f64),
        drift_factor: f64,
        fencing: bool,
    ) -> PyResult<Self> {
        let mut builder = Builder::new(&urls)
            .ttl(args::positive_seconds("ttl", ttl)?)
            .retry_delay(
                args::seconds("retry_delay[0]", retry_delay.0)?,
                args::seconds("retry_delay[1]", retry_delay.1)?,
            )
            .drift_factor(drift_factor)
            .fencing(fencing);
        if let Some(t) = node_timeout {
            builder = builder.node_timeout(args::positive_seconds("node_timeout", t)?);
        }
        if let Some(n) = retry_count {
            let n = u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "retry_count must be from 1 to {}, got {n}",
                    u32::MAX
                ))
            })?;
            builder = builder.retry_count(n);
        }
        let core = builder
            .build()
            .map_err(|e| Python::attach(|py| errors::to_py(py, "Locker", e)))?;
        Ok(Locker {
            core,
            pid: std::process::id(),
        })
    }

    /// Acquire `name` on a majority of the servers and return a Lock
    /// (a context manager that releases on exit).
    ///
    /// - `wait`: seconds to keep trying while another owner holds it
    ///   (0: one attempt). Then raises Taken.
    /// - `ttl`: this lock's TTL instead of the Locker's.
    /// - `auto_renew`: renew in the background every ttl/3 until released;
    ///   `lock.lost` turns True if renewal fails for good.
    /// - `reentrant`, `owner`: the same owner taking it again adds a hold
    ///   (pass `owner=held.owner`, every handle reentrant=True); each
    ///   release drops one. Such a lock is not released when dropped.
    ///
    /// Raises Taken (contention), NoQuorum (servers down or unreachable,
    /// with the per-node causes in `.failures`), Rejected (a server refused),
    /// ValueError (bad arguments). The GIL is released while waiting.
    #[pyo3(signature = (name, wait=0.0, *, ttl=None, auto_renew=true, reentrant=false, owner=None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: String,
        wait: f64,
        ttl: Option<f64>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
    ) -> PyResult<Lock> {
        let a = self.acquire_args(name, wait, ttl, auto_renew, reentrant, owner)?;
        let context = format!("lock {:?}", a.name);
        let outcome = block_on(py, self.acquire(a))?;
        outcome.map_err(|e| errors::to_py(py, &context, e))
    }

    /// The asyncio bridge of `lock` (used by AsyncLocker): `done(lock, None)`
    /// or `done(None, exception)` is called on a runtime thread.
    #[pyo3(signature = (done, name, wait=0.0, *, ttl=None, auto_renew=true, reentrant=false, owner=None))]
    #[allow(clippy::too_many_arguments)]
    fn _lock_async(
        &self,
        done: Py<PyAny>,
        name: String,
        wait: f64,
        ttl: Option<f64>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
    ) -> PyResult<Pending> {
        let a = self.acquire_args(name, wait, ttl, auto_renew, reentrant, owner)?;
        let context = format!("lock {:?}", a.name);
        spawn_with_callback(done, context, self.acquire(a), |py, lock| {
            Ok(Some(Py::new(py, lock)?.into_any()))
        })
    }

    /// The server URLs, one per node.
    #[getter]
    fn urls(&self) -> Vec<String> {
        self.core.config().urls().to_vec()
    }
    /// Default lock TTL in seconds.
    #[getter]
    fn ttl(&self) -> f64 {
        self.core.config().ttl().as_secs_f64()
    }
    /// Deadline of one request to one server, in seconds.
    #[getter]
    fn node_timeout(&self) -> f64 {
        self.core.config().node_timeout().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!(
            "<redis_lock_client.Locker nodes={:?} ttl={}s>",
            self.core.node_names(),
            self.ttl()
        )
    }
}
