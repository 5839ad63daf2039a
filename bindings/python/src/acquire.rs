//! One acquisition's checked arguments, and the acquisition itself: run
//! by `Locker.lock()` (blocking), by an `Acquisition` (asyncio), and again
//! by a Lock entered when it is not held.

use crate::errors::Failure;
use crate::lock::{shown_name, Lock, Shared};
use crate::spawn::{spawn_with_callback, Pending};
use pyo3::prelude::*;
use redis_lock_client::{Error, LockOptions, Locker as CoreLocker};
use std::sync::Arc;
use std::time::Instant;

/// The checked arguments of one `lock()` call.
#[derive(Clone)]
pub struct Acquire {
    pub name: String,
    pub opts: LockOptions,
    pub auto_renew: bool,
}

impl Acquire {
    /// `lock "name"`, for messages.
    pub fn context(&self) -> String {
        format!("lock {}", shown_name(&self.name))
    }

    /// Acquire, and wrap the hold (on the runtime, where its watchdog must
    /// be spawned). A `Taken` says how long the call waited.
    pub async fn run(self, core: CoreLocker) -> Result<Arc<Shared>, Failure> {
        let started = Instant::now();
        match core.acquire(&self.name, &self.opts).await {
            Ok(lock) => Ok(Shared::start(core, lock, self.auto_renew)),
            Err(Error::Taken) => Err(Failure {
                err: Error::Taken,
                waited: Some(started.elapsed()),
                lost_because: None,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// [`Acquire::run`], as a Python `Lock` that keeps these arguments.
    pub async fn lock(self, core: CoreLocker) -> Result<Lock, Failure> {
        let shared = self.clone().run(core.clone()).await?;
        Ok(Lock::new(core, self, shared))
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
        let work = self.args.clone().lock(self.core.clone());
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
