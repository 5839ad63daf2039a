//! The tokio runtime the core runs on: one per process, shared by the main
//! thread and every worker thread (each has its own N-API env), made on
//! first use. Every network wait runs here; JavaScript gets a promise that
//! is settled on its own thread, so the event loop never blocks.

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
/// other I/O in flight.
pub fn promise<'env, T, V, F, R>(env: &'env Env, work: F, to_js: R) -> Result<Object<'env>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = T> + Send + 'static,
    R: FnOnce(Env, T) -> Result<V> + Send + 'static,
{
    let rt = runtime()?;
    let (deferred, promise) = env.create_deferred()?;
    rt.spawn(async move {
        let out = work.await;
        deferred.resolve(move |env| to_js(env, out));
    });
    Ok(promise)
}
