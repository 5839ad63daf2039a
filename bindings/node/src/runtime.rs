//! The tokio runtime the core runs on: one per process, shared by the main
//! thread and every worker thread (each has its own N-API env), made on
//! first use. Every network wait runs here; JavaScript gets a promise that
//! is settled on its own thread, so the event loop never blocks.

use crate::settle::Settler;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, Error, Result, Status};
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

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

/// A promise of `work`, run on the runtime; `to_js` makes its value on the
/// JavaScript thread. Pending, it keeps the event loop alive, like any
/// other I/O in flight. Settled through the env's one threadsafe
/// function (`settle`), not one made per promise.
pub fn promise<'env, T, V, F, R>(env: &'env Env, work: F, to_js: R) -> Result<Object<'env>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = T> + Send + 'static,
    R: FnOnce(Env, T) -> Result<V> + Send + 'static,
{
    let rt = runtime()?;
    let (settler, promise) = Settler::new(env)?;
    // Boxed once here: an acquisition's future is about 5 KB, and moved
    // unboxed into the task it was copied whole at each step (memmove was
    // the largest single item in a perf profile of 64 concurrent calls).
    let work = Box::pin(work);
    rt.spawn(async move {
        let out = work.await;
        settler.settle(out, to_js);
    });
    Ok(promise)
}

/// The longest an env's teardown waits for clean-up.
const CLEAN_UP_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// At an env's teardown (its thread's last JavaScript ran): release the
/// locks it left held (`lock::release_left_behind`), then wait (at most
/// CLEAN_UP_AT_EXIT) until the background clean-up of every Locker is done:
/// those releases, and what given-up waits left in flight. Exiting first
/// would leave those locks held for their TTL.
pub fn wait_for_clean_up() {
    let Some(Ok(rt)) = RUNTIME.get() else { return };
    crate::lock::release_left_behind(rt);
    if tokio::runtime::Handle::try_current().is_ok() {
        return; // inside a runtime block_on would panic; never the case on a JS thread
    }
    rt.block_on(async {
        let _ = tokio::time::timeout(CLEAN_UP_AT_EXIT, redis_lock_client::background_done()).await;
    });
}
