//! The tokio runtime the core runs on: one per process, shared by the main
//! thread and every worker thread (each has its own N-API env), made on
//! first use. Every network wait runs here; JavaScript gets a promise that
//! is settled on its own thread, so the event loop never blocks.

use crate::settle::Settler;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, Error, Result, Status};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

pub fn runtime() -> Result<&'static Runtime> {
    let made = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("redis-lock-client")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the tokio runtime: {e}"))
    });
    made.as_ref()
        .map_err(|why| Error::new(Status::GenericFailure, why.clone()))
}

/// A promise of the future `work()` makes, run on the runtime; `to_js`
/// makes its value on the JavaScript thread. Pending, it keeps the event
/// loop alive, like any other I/O in flight. Settled through the env's one
/// threadsafe function (`settle`), not one made per promise.
pub fn promise<'env, T, V, W, F, R>(env: &'env Env, work: W, to_js: R) -> Result<Object<'env>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: FnOnce() -> F + Send + 'static,
    F: Future<Output = T> + Send + 'static,
    R: FnOnce(Env, T) -> Result<V> + Send + 'static,
{
    let rt = runtime()?;
    let (settler, promise) = Settler::new(env)?;
    // The future is made and boxed on the runtime, where it is freed: an
    // acquisition's future is about 5 KB (moved unboxed it was copied
    // whole at each step), and allocated here, on the JavaScript thread,
    // each one was freed on a runtime thread, past the allocator's
    // per-thread cache and into a lock on this thread's arena. The task
    // spawned from here holds only `work`'s captures.
    //
    // Counted from the call on, as this JavaScript thread's: its env's
    // teardown waits (at most 2 s, `exit.rs`) for its calls in flight, and
    // a lock one of them wins after that is released at once
    // (`lock::register`); uncounted, a `process.exit()` with acquisitions
    // in flight left each lock it won held on the servers for its TTL.
    // Counted per thread, not with the process's clean-up: a worker's
    // teardown waited for every other thread's calls too, 2 s whenever
    // another had a wait in flight, one worker after another at a
    // `process.exit()` (2026-11-29).
    let mine = CALLS.with(|calls| calls.clone()).begin();
    rt.spawn(async move {
        let out = Box::pin(work()).await;
        settler.settle(out, to_js);
        drop(mine);
    });
    Ok(promise)
}

/// A JavaScript thread's calls in flight (promises not yet settled).
#[derive(Default)]
struct Calls {
    count: AtomicUsize,
    none: Notify,
}

thread_local! {
    static CALLS: Arc<Calls> = Arc::default();
}

/// One call in flight, counted until dropped.
struct InFlight(Arc<Calls>);

impl Calls {
    fn begin(self: Arc<Self>) -> InFlight {
        self.count.fetch_add(1, Ordering::SeqCst);
        InFlight(self)
    }

    /// Resolves once this thread has no call in flight.
    async fn settled(&self) {
        loop {
            let none = self.none.notified();
            tokio::pin!(none);
            none.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            none.await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.none.notify_waiters();
        }
    }
}

/// Resolves once the calling JavaScript thread's calls in flight are all
/// done (their tasks ended).
pub fn this_threads_calls_done() -> impl Future<Output = ()> + Send + 'static {
    let calls = CALLS.with(|calls| calls.clone());
    async move { calls.settled().await }
}

/// The runtime, if one was made (nothing to clean up otherwise).
pub fn started() -> Option<&'static Runtime> {
    RUNTIME.get().and_then(|made| made.as_ref().ok())
}
