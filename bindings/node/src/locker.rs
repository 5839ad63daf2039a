//! `NativeLocker`: the core's quorum Locker for JavaScript (index.js wraps
//! it as `Locker`). Every call returns a promise settled from the runtime.

use crate::args;
use crate::errors::{self, Failure};
use crate::lock::{self, Held, NativeLock};
use crate::runtime::promise;
use napi::bindgen_prelude::{Either, Object};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use redis_lock_client::{Builder, Error as CoreError, LockOptions, Locker as CoreLocker};

/// The Locker's settings (index.js fills in the defaults). Milliseconds.
#[napi(object)]
pub struct LockerOptions {
    pub ttl: f64,
    pub node_timeout: Option<f64>,
    pub retry_count: Option<u32>,
    pub retry_delay_min: Option<f64>,
    pub retry_delay_max: Option<f64>,
    pub drift_factor: Option<f64>,
    pub fencing: Option<bool>,
}

#[napi]
pub struct NativeLocker {
    core: CoreLocker,
}

#[napi]
impl NativeLocker {
    /// Checks the settings (an InvalidArg error naming what is wrong); no
    /// connection is opened until the first lock.
    #[napi(constructor)]
    pub fn new(urls: Vec<String>, options: LockerOptions) -> Result<Self> {
        let mut builder = Builder::new(&urls).ttl(args::positive_millis("ttl", options.ttl)?);
        if let Some(t) = options.node_timeout {
            builder = builder.node_timeout(args::positive_millis("nodeTimeout", t)?);
        }
        if let Some(n) = options.retry_count {
            builder = builder.retry_count(n);
        }
        if let (Some(min), Some(max)) = (options.retry_delay_min, options.retry_delay_max) {
            builder = builder.retry_delay(
                args::millis("retryDelay.min", min)?,
                args::millis("retryDelay.max", max)?,
            );
        }
        if let Some(f) = options.drift_factor {
            builder = builder.drift_factor(f);
        }
        if let Some(on) = options.fencing {
            builder = builder.fencing(on);
        }
        let core = builder.build().map_err(|e| {
            let why = match e {
                redis_lock_client::Error::Config(why) => why,
                other => other.to_string(),
            };
            Error::new(Status::InvalidArg, why)
        })?;
        Ok(NativeLocker { core })
    }

    /// Acquire `name` (`wait` and `ttl` in milliseconds): resolves to a
    /// NativeLock, or to the Failure. The options come as arguments, not
    /// an object: reading an object's five properties by name was a
    /// measurable part of a call (2026-11-28).
    #[napi(ts_return_type = "Promise<NativeLock | Failure>")]
    #[allow(clippy::too_many_arguments)]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        name: String,
        wait: f64,
        ttl: Option<f64>,
        auto_renew: bool,
        reentrant: bool,
        owner: Option<String>,
    ) -> Result<Object<'env>> {
        args::lock_name(&name)?;
        let mut opts = LockOptions::new()
            .wait(args::millis("wait", wait)?)
            .reentrant(reentrant);
        if let Some(ttl) = ttl {
            opts = opts.ttl(args::positive_millis("ttl", ttl)?);
        }
        if let Some(owner) = owner {
            opts = opts.owner(owner);
        }
        let core = self.core.clone();
        // Quoted only on a failure (a measurable cost on every call).
        let named = name.clone();
        let by = std::thread::current().id();
        let gone = lock::env_gone();
        let work = move || async move {
            let acquire = async {
                let held = if auto_renew {
                    Held::Auto(core.acquire_auto(&name, &opts).await?)
                } else {
                    Held::manual(core.acquire(&name, &opts).await?)
                };
                Ok(NativeLock::start(core, held, by))
            };
            tokio::select! {
                outcome = acquire => outcome,
                // Nobody is left to see this outcome (see `env_gone`).
                () = gone => Err(CoreError::Config("the thread that asked for the lock ended".into())),
            }
        };
        promise(env, work, move |_, outcome| {
            Ok(match outcome {
                Ok(lock) => Either::<NativeLock, Failure>::A(lock),
                Err(e) => Either::B(errors::failure(&format!("lock {named:?}"), e)),
            })
        })
    }

    /// The server URLs, one per node.
    #[napi(getter)]
    pub fn urls(&self) -> Vec<String> {
        self.core.config().urls().to_vec()
    }

    /// Default lock TTL in milliseconds.
    #[napi(getter)]
    pub fn ttl(&self) -> f64 {
        args::to_millis(self.core.config().ttl())
    }

    /// Deadline of one request to one server, in milliseconds.
    #[napi(getter)]
    pub fn node_timeout(&self) -> f64 {
        args::to_millis(self.core.config().node_timeout())
    }
}
