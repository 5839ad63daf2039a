//! The asyncio bridge, Rust half: run a core future on the runtime and
//! hand its outcome to a Python callback `done(result, error)`, called on a
//! runtime thread. The Python half (`_aio.py`) forwards it to the event
//! loop with `loop.call_soon_threadsafe`, and cancels through `Pending`.
//!
//! Why not pyo3-async-runtimes: its tokio runtime is a process-wide
//! once-cell that cannot be replaced, so in a forked child (multiprocessing's
//! default start method on Linux) every future would hang on the parent's
//! runtime, whose threads the child does not have. This bridge uses the
//! per-process runtime of `runtime.rs`, and it is thirty lines.

use crate::errors;
use crate::runtime;
use pyo3::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::task::AbortHandle;

/// Runtime threads' callbacks into Python running now, and whether they
/// are still allowed. At exit `close_gate` (an `atexit` hook) closes the
/// gate and waits, with the GIL released, until none is running. A runtime
/// thread still in a callback when finalization began aborted the process
/// ("Fatal Python error: PyGILState_Release: thread state ... must be
/// current when releasing", 4 runs in 30 of a short asyncio script,
/// cd2a77a). Counters, not a lock: a forked child inherits the count of
/// parent threads it does not have, and a lock held by one would never be
/// released (its exit hung, c8f4c87); `gate_after_fork` resets them in
/// the child, and the wait is bounded anyway.
static INSIDE: AtomicUsize = AtomicUsize::new(0);
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Inside the gate until dropped: also when the callback panics, which
/// would otherwise hold the exit hook for its whole wait.
struct Inside;

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Enter the gate (None: closed, do not call into Python).
fn enter() -> Option<Inside> {
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let inside = Inside;
    if CLOSED.load(Ordering::SeqCst) {
        return None; // `inside` dropped: left again
    }
    Some(inside)
}

/// In a forked child (`os.register_at_fork`): none of the parent's runtime
/// threads exist here.
#[pyfunction]
pub fn gate_after_fork() {
    INSIDE.store(0, Ordering::SeqCst);
    CLOSED.store(false, Ordering::SeqCst);
}

/// How long interpreter exit waits for the background clean-up (and for
/// the release of each lock still held when it is destroyed at exit).
pub const CLEAN_UP_FOR: Duration = Duration::from_secs(2);

/// Whether the interpreter is exiting: the exit hook ran. Module globals
/// are destroyed after it, and nothing waits for a release spawned then.
pub fn exiting() -> bool {
    CLOSED.load(Ordering::SeqCst)
}
/// When interpreter exit stops waiting for the releases of the locks
/// destroyed then (module globals): one budget of `CLEAN_UP_FOR` for all of
/// them, counted from the first. Each waited its own 2 s (a node timeout,
/// with a server stalled), so 20 global locks held an exit 10 s, and a
/// thousand for minutes (2026-11-28).
pub fn exit_release_deadline() -> Instant {
    static DEADLINE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *DEADLINE.get_or_init(|| Instant::now() + CLEAN_UP_FOR)
}

/// How long it waits for callbacks in progress (each is short).
const CALLBACKS_FOR: Duration = Duration::from_secs(2);

/// Called at interpreter exit (registered in `__init__.py`): first let the
/// clean-up of given-up acquisitions finish (a wait cancelled just before
/// exit still has requests on their way; what they take is given back as
/// they land, if the process is still there: `background_done`), bounded;
/// then close the gate. The GIL is released throughout.
#[pyfunction]
pub fn close_gate(py: Python<'_>) {
    py.detach(|| {
        if let Some(rt) = runtime::existing() {
            rt.block_on(async {
                let _ =
                    tokio::time::timeout(CLEAN_UP_FOR, redis_lock_client::background_done()).await;
            });
        }
        CLOSED.store(true, Ordering::SeqCst);
        let until = Instant::now() + CALLBACKS_FOR;
        while INSIDE.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// An operation in flight; `cancel()` drops it (asyncio cancellation).
#[pyclass(module = "redis_lock_client", frozen)]
pub struct Pending {
    abort: AbortHandle,
}

#[pymethods]
impl Pending {
    /// Drop the operation. An acquisition cancelled mid-way may leave the
    /// lock held on some servers until its TTL runs out.
    fn cancel(&self) {
        self.abort.abort();
    }
}

/// Spawn `work`; when it ends, call `done(convert(value), None)` or
/// `done(None, exception)`. `context` prefixes error messages.
pub fn spawn_with_callback<T, E, F, C>(
    done: Py<PyAny>,
    context: String,
    work: F,
    convert: C,
) -> PyResult<Pending>
where
    T: Send + 'static,
    E: Into<errors::Failure> + Send + 'static,
    F: Future<Output = Result<T, E>> + Send + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Option<Py<PyAny>>> + Send + 'static,
{
    // After the exit hook no callback would run, and the awaiting code
    // would hang (an atexit hook registered before this package was
    // imported runs after ours, 7818b9e): refuse at once.
    if CLOSED.load(Ordering::SeqCst) {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "redis_lock_client: the interpreter is exiting (asyncio calls stop at exit; \
             use the blocking Locker in atexit hooks)",
        ));
    }
    let rt = runtime::runtime()?;
    let task = rt.spawn(async move {
        let outcome = work.await;
        let Some(_inside) = enter() else {
            return; // the interpreter is exiting: nobody awaits this any more
        };
        Python::attach(|py| {
            let (value, error) = match outcome.map_err(|e| errors::to_py(py, &context, e)) {
                Ok(v) => match convert(py, v) {
                    Ok(obj) => (obj, None),
                    Err(e) => (None, Some(e.into_value(py))),
                },
                Err(e) => (None, Some(e.into_value(py))),
            };
            if let Err(e) = done.call1(py, (value, error)) {
                e.write_unraisable(py, None);
            }
        });
    });
    Ok(Pending {
        abort: task.abort_handle(),
    })
}
