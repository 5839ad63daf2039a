//! One acquisition's checked arguments, and the acquisition itself: run
//! by `Locker.lock()` (blocking), by an `Acquisition` (asyncio, in
//! `locker.rs`), and again by a Lock entered when it is not held.

use crate::errors::Failure;
use crate::hold::{shown_name, Shared};
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
}
