//! Quorum client for the redis-lock module: the Redlock algorithm over N
//! independent Redis servers running `LOCK.*`, with fencing tokens,
//! auto-renewal and distinct errors.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redis_lock_client::Error> {
//! use std::time::Duration;
//! let locker = redis_lock_client::Builder::new(&[
//!     "redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/",
//! ])
//! .ttl(Duration::from_secs(10))
//! .build()?;
//! let lock = locker.lock("jobs:nightly", Duration::from_secs(5)).await?;
//! println!("holding with fencing token {}", lock.token());
//! locker.unlock(&lock).await?;
//! # Ok(()) }
//! ```
//!
//! Features: `tls` (`rediss://` URLs, needs OpenSSL) and `cli` (the
//! `redis-lock` binary, with clap), both off by default, so a library user
//! needs neither unless it asks for them.
#![warn(missing_docs)]

mod background;
pub use background::{background_done, counted};
mod busy;
mod config;
pub mod duration;
mod endpoint;
mod error;
mod guard;
mod let_go;
mod lock;
mod locker;
mod node;
mod one_runtime;
mod options;
mod pending;
pub mod quorum;
mod round;
mod server_clock;
mod server_ids;
mod status;
mod stragglers;
mod waiting;

pub use config::{Builder, Config, MIN_TTL};
pub use error::{Error, NodeFailure};
pub use guard::AutoLock;
pub use lock::Lock;
pub use locker::{random_owner, Locker};
pub use node::Failure;
pub use options::LockOptions;
pub use status::{escape_owner, quorum_state, NodeReport, NodeStatus, QuorumState};
