//! `Locker`: the core's quorum Locker for Python, blocking calls with the
//! GIL released (the asyncio API in `_aio.py` wraps `_lock_async`).

use crate::acquire::Acquire;
use crate::args::{self, Wait};
use crate::errors;
use crate::hold::shown_name;
use crate::lock::Lock;
use crate::runtime::{self, block_on};
use crate::spawn::{spawn_with_callback, Pending};
use crate::status::LockStatus;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use redis_lock_client::{Builder, LockOptions, Locker as CoreLocker};
use std::time::Duration;

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
#[pyclass(module = "redis_lock_client", frozen, subclass)]
pub struct Locker {
    core: CoreLocker,
    pid: u32,
}

impl Locker {
    #[allow(clippy::too_many_arguments)]
    fn acquire_args(
        &self,
        name: &Bound<'_, PyAny>,
        wait: Wait,
        ttl: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
        shared: bool,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Acquire> {
        runtime::check_pid(self.pid, "Locker")?;
        let name = args::lock_name(name)?;
        let mut opts = LockOptions::new()
            .wait(wait.0)
            .reentrant(reentrant)
            .shared_hold(shared);
        if let Some(limit) = limit.filter(|l| !l.is_none()) {
            opts = opts.limit(args::limit(limit)?);
        }
        if let Some(ttl) = ttl.filter(|t| !t.is_none()) {
            opts = opts.ttl(args::positive_seconds("ttl", ttl)?);
        }
        if let Some(owner) = owner {
            if owner.is_empty() {
                return Err(PyValueError::new_err("owner must not be empty"));
            }
            opts = opts.owner(owner);
        }
        Ok(Acquire {
            name,
            opts,
            auto_renew,
        })
    }
}

#[pymethods]
impl Locker {
    #[new]
    #[pyo3(
        text_signature = "(urls, ttl=10.0, *, node_timeout=None, retry_count=None, retry_delay=(0.05, 0.25), drift_factor=0.01, fencing=True)"
    )]
    #[pyo3(signature = (urls, ttl=None, *, node_timeout=None, retry_count=None, retry_delay=None, drift_factor=0.01, fencing=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        urls: &Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        node_timeout: Option<Bound<'_, PyAny>>,
        retry_count: Option<Bound<'_, PyAny>>,
        retry_delay: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        drift_factor: f64,
        fencing: bool,
    ) -> PyResult<Self> {
        let py = urls.py();
        let urls = args::urls(urls)?;
        let ttl = match ttl.filter(|t| !t.is_none()) {
            Some(t) => args::positive_seconds("ttl", &t)?,
            None => Duration::from_secs(10),
        };
        let mut builder = Builder::new(&urls)
            .ttl(ttl)
            .drift_factor(drift_factor)
            .fencing(fencing);
        if let Some((min, max)) = retry_delay {
            builder = builder.retry_delay(
                args::seconds("retry_delay[0]", &min)?,
                args::seconds("retry_delay[1]", &max)?,
            );
        }
        if let Some(t) = node_timeout.filter(|t| !t.is_none()) {
            builder = builder.node_timeout(args::positive_seconds("node_timeout", &t)?);
        }
        if let Some(n) = retry_count.filter(|n| !n.is_none()) {
            let n = args::count("retry_count", &n, 1)?;
            let n = u32::try_from(n).map_err(|_| {
                PyValueError::new_err(format!(
                    "retry_count must be from 1 to {}, got {n}",
                    u32::MAX
                ))
            })?;
            builder = builder.retry_count(n);
        }
        let core = builder
            .build()
            .map_err(|e| errors::to_py(py, "Locker", e))?;
        // A name the resolver says does not exist is a typo, not a server
        // that is down: with it the Locker ran on the rest without a word
        // (a 3-server set-up with no fault tolerance). The CLI refuses the
        // same list (exit 78).
        let lookup = urls.clone();
        if let Some(host) = py.detach(move || redis_lock_client::unknown_host(&lookup)) {
            let url = urls
                .iter()
                .find(|u| u.contains(host.as_str()))
                .cloned()
                .unwrap_or_default();
            return Err(PyValueError::new_err(format!(
                "Locker: server host {host:?} does not exist (in {url:?}: the resolver knows \
                 no such name)"
            )));
        }
        Ok(Locker {
            core,
            pid: std::process::id(),
        })
    }

    /// Acquire `name` on a majority of the servers and return a Lock
    /// (a context manager that releases on exit).
    ///
    /// - `name`: str, or bytes in UTF-8.
    /// - `wait`: seconds to keep trying while another owner holds it
    ///   (0: one attempt; None: no limit). Then raises Taken. A wait is for
    ///   a busy lock: with a majority of the servers unreachable as it
    ///   begins, NoQuorum comes at once (within about a node timeout).
    /// - `ttl`: this lock's TTL instead of the Locker's.
    /// - `auto_renew`: renew in the background every ttl/3 until released;
    ///   `lock.lost` turns True if renewal fails for good.
    /// - `reentrant`, `owner`: the same owner taking it again adds a hold
    ///   (pass `owner=held.owner`, every handle reentrant=True); each
    ///   release drops one. Such a lock is not released when dropped.
    ///   Without reentrant=True, a second lock() with the owner of a held
    ///   lock succeeds too (the servers see one holder) and either
    ///   handle's release frees it for both.
    /// - `shared`: a shared hold (a read lock): any number of shared
    ///   holders at once, never beside an exclusive one.
    /// - `limit`: at most `limit` shared holders at once (a semaphore whose
    ///   permits expire with their holder); implies `shared`. 1 to
    ///   2**31 - 1; every holder of the name gives the same limit (another
    ///   one raises Rejected). With 3 servers a limit above 1 needs all 3.
    ///
    /// Raises Taken (contention), NoQuorum (servers down or unreachable,
    /// with the per-node causes in `.failures`), Rejected (a server refused),
    /// ValueError / TypeError (bad arguments). The GIL is released while
    /// waiting.
    #[pyo3(signature = (name, wait=Wait(Duration::ZERO), *, ttl=None, auto_renew=true, reentrant=false, owner=None, shared=false, limit=None))]
    #[pyo3(
        text_signature = "(self, name, wait=0.0, *, ttl=None, auto_renew=True, reentrant=False, owner=None, shared=False, limit=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: Bound<'_, PyAny>,
        wait: Wait,
        ttl: Option<Bound<'_, PyAny>>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
        shared: bool,
        limit: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Lock> {
        let a = self.acquire_args(
            &name,
            wait,
            ttl.as_ref(),
            auto_renew,
            reentrant,
            owner,
            shared,
            limit.as_ref(),
        )?;
        let context = a.context();
        let outcome = block_on(py, Lock::acquire(a, self.core.clone()))?;
        outcome.map_err(|e| errors::to_py(py, &context, e))
    }

    /// The asyncio side of `lock` (used by AsyncLocker): the arguments are
    /// checked now; the returned Acquisition runs it (`_start`).
    #[pyo3(signature = (name, wait=Wait(Duration::ZERO), *, ttl=None, auto_renew=true, reentrant=false, owner=None, shared=false, limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn _acquisition(
        &self,
        name: Bound<'_, PyAny>,
        wait: Wait,
        ttl: Option<Bound<'_, PyAny>>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
        shared: bool,
        limit: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Acquisition> {
        let args = self.acquire_args(
            &name,
            wait,
            ttl.as_ref(),
            auto_renew,
            reentrant,
            owner,
            shared,
            limit.as_ref(),
        )?;
        Ok(Acquisition {
            core: self.core.clone(),
            args,
            pid: self.pid,
        })
    }

    /// Who holds `name`, as a majority of the servers says now: a
    /// LockStatus (`state`, `held`, `owner`, `token`, `validity`,
    /// `servers` of `of`, `failures`). One round trip to every server.
    fn status(&self, py: Python<'_>, name: Bound<'_, PyAny>) -> PyResult<LockStatus> {
        runtime::check_pid(self.pid, "Locker")?;
        let name = args::lock_name(&name)?;
        block_on(py, LockStatus::query(self.core.clone(), name))
    }

    /// The asyncio side of `status`: `done(status, None)` on a runtime thread.
    fn _status_async(&self, done: Py<PyAny>, name: Bound<'_, PyAny>) -> PyResult<Pending> {
        runtime::check_pid(self.pid, "Locker")?;
        let name = args::lock_name(&name)?;
        let context = format!("status of {}", shown_name(&name));
        let work = LockStatus::query(self.core.clone(), name);
        let work = async move { Ok::<_, redis_lock_client::Error>(work.await) };
        spawn_with_callback(done, context, work, |py, status| {
            Ok(Some(Py::new(py, status)?.into_any()))
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

/// An acquisition whose arguments were checked when `AsyncLocker.lock()`
/// was called (bad arguments raise there, not at the `await`); `_start`
/// runs it, once per `await` or `async with`.
#[pyclass(module = "redis_lock_client", frozen)]
pub struct Acquisition {
    pub core: CoreLocker,
    pub args: Acquire,
    /// The process the Locker was made in (it does not survive fork()).
    pub pid: u32,
}

#[pymethods]
impl Acquisition {
    /// Acquire: `done(lock, None)` or `done(None, exception)` is called on
    /// a runtime thread.
    fn _start(&self, done: Py<PyAny>) -> PyResult<Pending> {
        crate::runtime::check_pid(self.pid, "Locker")?;
        let context = self.args.context();
        let work = Lock::acquire(self.args.clone(), self.core.clone());
        spawn_with_callback(done, context, work, |py, lock| {
            Ok(Some(Py::new(py, lock)?.into_any()))
        })
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> String {
        self.args.name.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "<redis_lock_client.Acquisition {}>",
            shown_name(&self.args.name)
        )
    }
}
