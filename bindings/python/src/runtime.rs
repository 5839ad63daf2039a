//! The tokio runtime the core runs on: one per process, made on first use.
//! A forked child inherits the parent's runtime without its worker threads
//! (fork copies only the calling thread), so a child gets a fresh one.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::runtime::Runtime;

/// (pid that built it, runtime). Leaked on purpose: dropping a runtime
/// joins its threads, which a forked child does not have.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// How often a blocking call wakes to let Python handle signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

pub fn runtime() -> PyResult<&'static Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((owner, rt)) = *slot {
        if owner == pid {
            return Ok(rt);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("redis-lock-client")
        .enable_all()
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the tokio runtime: {e}")))?;
    let rt: &'static Runtime = Box::leak(Box::new(rt));
    *slot = Some((pid, rt));
    Ok(rt)
}

/// This process's runtime, if one was made (none: nothing ever ran).
pub fn existing() -> Option<&'static Runtime> {
    let slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    slot.filter(|(owner, _)| *owner == std::process::id())
        .map(|(_, rt)| rt)
}

/// Run `fut` on the runtime and wait for it with the GIL released, waking
/// every `SIGNAL_POLL` so that Ctrl-C (KeyboardInterrupt) stops the wait.
/// An interrupted call drops the operation: a lock it was acquiring may
/// stay held on some servers until its TTL runs out.
pub fn block_on<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let rt = runtime()?;
    let mut handle = rt.spawn(fut);
    loop {
        // The timer is made inside block_on: it needs the runtime's context.
        let polled = py
            .detach(|| rt.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut handle).await }));
        match polled {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(join)) => {
                return Err(PyRuntimeError::new_err(format!(
                    "redis-lock-client internal task failed: {join}"
                )))
            }
            Err(_elapsed) => {
                if let Err(interrupt) = py.check_signals() {
                    handle.abort();
                    return Err(interrupt);
                }
            }
        }
    }
}

/// Guard against use in a forked child: connections and the runtime of
/// the parent do not survive `fork()`.
pub fn check_pid(created_in: u32, what: &str) -> PyResult<()> {
    let here = std::process::id();
    if here == created_in {
        return Ok(());
    }
    Err(PyRuntimeError::new_err(format!(
        "this {what} was created in process {created_in} and cannot be used in process {here} \
         (a forked child): its connections do not survive fork(); create a new Locker in the child"
    )))
}
